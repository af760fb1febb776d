#!/usr/bin/env bash
# Regenerates the CUDA backend's PTX (crates/kin-infer-core/src/backend/device/kernels.ptx)
# from its kernel source (cuda_kernels.rs) with the pinned NVRTC; run it after changing a
# kernel. CI checks the committed PTX is current (crates/kin-infer-core/tests/cuda.rs).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/nvrtc-env.sh
KIN_WRITE_PTX=1 KIN_REQUIRE_NVRTC=1 cargo test -p kin-infer-core --features cuda --test cuda \
    the_shipped_ptx_is_compiled_from_the_current_kernel_source
