//! The CUDA backend without a GPU (feature `cuda`; CI builds and runs this): the shipped PTX is
//! what NVRTC makes of the kernel source today (when NVRTC is present: CI installs the
//! `nvidia-cuda-nvrtc-cu12==12.0.76` wheel and sets `KIN_REQUIRE_NVRTC=1`), and without a
//! driver or device the backend is a typed error, never a panic. On a machine with a GPU the
//! op and model suites run under `KIN_INFER_BACKEND=cuda` (scripts/run-gpu-tests.sh).
//!
//! `KIN_WRITE_PTX=1` rewrites `kernels.ptx` from the source (scripts/gen-cuda-ptx.sh).
#![cfg(feature = "cuda")]

use kin_infer_core::backend::device::cuda::{
    driver_present, kernel_source, CudaCompute, NVRTC_ARCH, PTX,
};
use kin_infer_core::ErrorKind;

fn nvrtc_present() -> bool {
    // SAFETY: only tries to dlopen the NVRTC library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

#[test]
fn the_shipped_ptx_is_compiled_from_the_current_kernel_source() {
    if !nvrtc_present() {
        assert!(
            std::env::var("KIN_REQUIRE_NVRTC").map_or(true, |v| v != "1"),
            "KIN_REQUIRE_NVRTC=1 but libnvrtc could not be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("SKIPPED: NVRTC not found (scripts/gen-cuda-ptx.sh installs it)");
        return;
    }
    let opts = cudarc::nvrtc::CompileOptions {
        arch: Some(NVRTC_ARCH),
        ..Default::default()
    };
    let ptx = cudarc::nvrtc::compile_ptx_with_opts(kernel_source(), opts)
        .unwrap_or_else(|e| panic!("the kernels do not compile: {e:?}"))
        .to_src();
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/backend/device/kernels.ptx"
    );
    if std::env::var("KIN_WRITE_PTX").is_ok_and(|v| v == "1") {
        std::fs::write(path, &ptx).unwrap();
        eprintln!("wrote {path}");
        return;
    }
    assert!(
        ptx == PTX,
        "kernels.ptx is stale: run scripts/gen-cuda-ptx.sh after changing cuda_kernels.rs"
    );
    // Every kernel the backend loads is in it.
    for name in [
        "linear",
        "causal_scores",
        "disentangled",
        "conv1d",
        "copy2d",
    ] {
        assert!(PTX.contains(&format!(".entry {name}(")), "{name}");
    }
}

#[test]
fn without_a_device_the_backend_is_a_typed_error() {
    match CudaCompute::new(0) {
        Ok(be) => {
            // A GPU is here: the suites in scripts/run-gpu-tests.sh cover it.
            eprintln!("CUDA device present: {}", be.device_info().name);
        }
        Err(e) => {
            eprintln!("no CUDA device: {e}");
            if !driver_present() {
                assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
                assert!(e.to_string().contains("no CUDA driver"), "{e}");
            }
        }
    }
    // Past the last device is always an error.
    let e = CudaCompute::new(1 << 20).err().expect("no millionth GPU");
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}
