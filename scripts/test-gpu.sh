#!/usr/bin/env bash
# The GPU backends' tests that run without a GPU (CI):
# - wgpu on whatever Vulkan/Metal/DX12 adapter the machine has; without a GPU, Debian's
#   lavapipe (mesa-vulkan-drivers, a Vulkan implementation on the CPU) is installed and used:
#   KIN_INFER_BACKEND=wgpu allows a software adapter, which `auto` never picks. Speed on
#   lavapipe means nothing; these are correctness tests.
# - CUDA built (no toolkit needed), its shipped PTX checked against the kernel source with the
#   pinned NVRTC, without a driver a typed error (crates/kin-infer-core/tests/cuda.rs), and
#   every CUDA kernel built as C++ and run on the CPU against the CPU backend
#   (tests/cuda_emu.rs). On a machine with a GPU: scripts/run-gpu-tests.sh.
# The wgpu suites:
#   crates/kin-infer-core/tests/gpu_ops.rs  every op against the CPU backend
#   crates/kin-infer/tests/gpu.rs           every fixture's golden, incremental decoding,
#                                           batch invariance, run-to-run identity, MiniLM
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

have_vulkan() {
    compgen -G "/usr/share/vulkan/icd.d/*.json" >/dev/null || compgen -G "/etc/vulkan/icd.d/*.json" >/dev/null
}
if [[ "$(uname -s)" == Linux ]] && ! have_vulkan; then
    echo "test-gpu: installing Debian's mesa-vulkan-drivers (lavapipe)" >&2
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mesa-vulkan-drivers >&2
fi
# Mesa warns on every start without it.
if [[ -z "${XDG_RUNTIME_DIR:-}" ]]; then
    XDG_RUNTIME_DIR="$(mktemp -d)"
    export XDG_RUNTIME_DIR
fi
if [[ -z "${KIN_MINILM_DIR:-}" ]]; then
    KIN_MINILM_DIR="$(bash scripts/fetch-minilm.sh)"
    export KIN_MINILM_DIR
fi
source scripts/nvrtc-env.sh
# One build with both GPU features for all four test binaries.
KIN_INFER_BACKEND=wgpu KIN_REQUIRE_NVRTC=1 KIN_REQUIRE_CXX=1 cargo test -p kin-infer-core -p kin-infer \
    --features kin-infer-core/wgpu,kin-infer-core/cuda,kin-infer/wgpu,kin-infer/cuda \
    --test gpu_ops --test gpu --test cuda --test cuda_emu

