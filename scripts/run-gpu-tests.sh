#!/usr/bin/env bash
# The GPU suite on a machine with a device: every op against the CPU backend
# (crates/kin-infer-core/tests/gpu_ops.rs) and the model suite (crates/kin-infer/tests/gpu.rs:
# every fixture's golden, incremental decoding, batch invariance, run-to-run identity, MiniLM
# against sentence-transformers), under CUDA and under wgpu (Vulkan).
#
#   scripts/run-gpu-tests.sh            build if needed, then run (a machine with cargo access)
#   scripts/run-gpu-tests.sh build      build the two test binaries with both GPU features into
#                                       target/gpu-tests (stripped, a few MB: small enough to
#                                       carry to a machine with a GPU and no registry)
#   scripts/run-gpu-tests.sh run        run them: device facts first (nvidia-smi, vulkaninfo),
#                                       then each suite under each backend present
#
# The test binaries find the fixtures through the checkout they were built in; `run` links
# that path to this checkout when it is absent. MiniLM is used when models/all-MiniLM-L6-v2 is
# present (scripts/fetch-minilm.sh; carry it too).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=target/gpu-tests
FEATURES=kin-infer-core/wgpu,kin-infer-core/cuda,kin-infer/wgpu,kin-infer/cuda

build() {
    mkdir -p "$OUT"
    cargo test --no-run -p kin-infer-core -p kin-infer --features "$FEATURES" \
        --test gpu_ops --test gpu --message-format=json 2>/dev/null |
        python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] in ("gpu", "gpu_ops"):
        print(m["target"]["name"], m["executable"])
' | while read -r name exe; do
        cp "$exe" "$OUT/$name"
        strip "$OUT/$name"
    done
    pwd > "$OUT/build-root"
    ls -la "$OUT"
}

run() {
    [[ -x "$OUT/gpu" && -x "$OUT/gpu_ops" ]] || { echo "run-gpu-tests: no binaries in $OUT (run: $0 build)" >&2; exit 2; }
    root="$(cat "$OUT/build-root")"
    if [[ ! -e "$root" ]]; then
        mkdir -p "$(dirname "$root")"
        ln -s "$PWD" "$root"
    fi
    echo "== device"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
    command -v vulkaninfo >/dev/null && vulkaninfo --summary 2>/dev/null | grep -E "deviceName|driverName" || echo "no vulkaninfo"
    [[ -z "${XDG_RUNTIME_DIR:-}" ]] && export XDG_RUNTIME_DIR="$(mktemp -d)"
    [[ -f models/all-MiniLM-L6-v2/model.safetensors ]] && export KIN_MINILM_DIR="$PWD/models/all-MiniLM-L6-v2"
    backends="${GPU_BACKENDS:-wgpu}"
    if [[ -z "${GPU_BACKENDS:-}" ]] && nvidia-smi >/dev/null 2>&1; then backends="cuda wgpu"; fi
    status=0
    for backend in $backends; do
        for t in gpu_ops gpu; do
            echo "== $t under $backend"
            KIN_INFER_BACKEND=$backend "$OUT/$t" --test-threads 1 || status=1
        done
    done
    exit $status
}

case "${1:-all}" in
build) build ;;
run) run ;;
all) build && run ;;
*) echo "usage: $0 [build|run]" >&2; exit 2 ;;
esac
