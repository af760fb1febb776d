# Sourced by scripts/test-gpu.sh and scripts/gen-cuda-ptx.sh: NVRTC 12.0 from NVIDIA's PyPI
# wheel (23 MB, no toolkit, no GPU needed) in target/nvrtc, on LD_LIBRARY_PATH. It compiles the
# CUDA kernels to the PTX the CUDA backend ships (crates/kin-infer-core/src/backend/device/
# kernels.ptx); pinned, because another NVRTC writes other PTX.
NVRTC_WHEEL="nvidia-cuda-nvrtc-cu12==12.0.76"
NVRTC_DIR="$PWD/target/nvrtc"
if [[ ! -f "$NVRTC_DIR/nvidia/cuda_nvrtc/lib/libnvrtc.so.12" ]]; then
    python3 -m pip install -q --no-deps --target "$NVRTC_DIR" "$NVRTC_WHEEL" >&2
fi
export LD_LIBRARY_PATH="$NVRTC_DIR/nvidia/cuda_nvrtc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
