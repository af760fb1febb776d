//! The CUDA kernels without a GPU (feature `cuda`; CI runs it): the kernel source the CUDA
//! backend ships (`cuda_kernels.rs`, compiled to `kernels.ptx`) built as C++ for the CPU with
//! a small shim (the CUDA qualifiers as nothing, `blockIdx`/`gridDim`/`threadIdx` set per
//! emulated thread), loaded, and driven by the real GPU backend code (`GpuBackend` over a
//! [`Device`] that runs every block and thread in order). The shared op suite then compares
//! every op against the CPU backend, as it does for wgpu on lavapipe: a kernel that
//! computes the wrong thing fails here, not first on a GPU. What this cannot see: the driver
//! API calls and launch limits of a real device (scripts/run-gpu-tests.sh covers those).
//! Skips (saying so) without a C++ compiler, unless `KIN_REQUIRE_CXX=1`.
#![cfg(feature = "cuda")]

mod gpu_suite;

use kin_infer_core::backend::device::cuda::kernel_source;
use kin_infer_core::backend::device::{Device, DeviceBuf, GpuBackend};
use kin_infer_core::backend::{GpuCompute, GpuDevice};
use std::cell::UnsafeCell;
use std::path::PathBuf;
use std::process::Command;

const SHIM: &str = r#"
#include <cmath>
#include <cstring>
#include <algorithm>
struct EmuDim { unsigned x, y, z; };
static thread_local EmuDim blockIdx, gridDim, threadIdx;
#define __global__
#define __device__
#define __forceinline__ inline
static inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
using std::max;
using std::min;
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
extern "C" void emu_at(unsigned bx, unsigned by, unsigned gx, unsigned gy, unsigned tx) {
    blockIdx = {bx, by, 0}; gridDim = {gx, gy, 1}; threadIdx = {tx, 0, 0};
}
"#;

/// The kernels as a shared library for this CPU (`None` without `c++`).
fn build() -> Option<PathBuf> {
    let dir = std::env::temp_dir().join(format!("kin-cuda-emu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("kernels.cpp");
    let lib = dir.join("libkernels.so");
    std::fs::write(&src, format!("{SHIM}{}", kernel_source())).unwrap();
    // No contraction beyond the source's own fmaf: the kernels' rounding, as written.
    let out = Command::new("c++")
        .args(["-O1", "-shared", "-fPIC", "-ffp-contract=off", "-o"])
        .arg(&lib)
        .arg(&src)
        .output();
    match out {
        Ok(o) if o.status.success() => Some(lib),
        Ok(o) => panic!(
            "the CUDA kernels do not build as C++:\n{}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            assert!(
                std::env::var("KIN_REQUIRE_CXX").map_or(true, |v| v != "1"),
                "KIN_REQUIRE_CXX=1 but no c++: {e}"
            );
            eprintln!("SKIPPED: no C++ compiler ({e})");
            None
        }
    }
}

/// A buffer of words the emulated kernels write through raw pointers.
struct EmuBuf(UnsafeCell<Vec<u32>>);
// SAFETY: the emulator runs one launch at a time on the calling thread.
unsafe impl Send for EmuBuf {}
unsafe impl Sync for EmuBuf {}

#[repr(C)]
#[derive(Clone, Copy)]
struct P([u32; 16]);

struct Emu {
    lib: libloading::Library,
    info: GpuDevice,
}

type At = unsafe extern "C" fn(u32, u32, u32, u32, u32);

impl Device for Emu {
    const NAME: &'static str = "cuda-emu";
    type Buf = EmuBuf;

    fn info(&self) -> &GpuDevice {
        &self.info
    }

    fn buf(b: &DeviceBuf) -> &EmuBuf {
        match b {
            DeviceBuf::Other(x) => x.downcast_ref().expect("an emulator buffer"),
            #[allow(unreachable_patterns)]
            _ => panic!("another backend's buffer"),
        }
    }

    fn wrap(b: EmuBuf) -> DeviceBuf {
        DeviceBuf::Other(Box::new(b))
    }

    fn alloc(&self, words: usize) -> EmuBuf {
        EmuBuf(UnsafeCell::new(vec![0; words.max(1)]))
    }

    fn upload(&self, words: &[u32]) -> EmuBuf {
        let mut v = words.to_vec();
        if v.is_empty() {
            v.push(0);
        }
        EmuBuf(UnsafeCell::new(v))
    }

    fn launch(&self, op: &'static str, params: &[u32], bufs: &[&EmuBuf], invocations: usize) {
        if invocations == 0 {
            return;
        }
        let mut p = P([0; 16]);
        p.0[..params.len()].copy_from_slice(params);
        // SAFETY: distinct buffers (the seam's borrows guarantee it, but for the shared
        // read-only dummy) live for the call; the kernels bound every index by their params.
        let ptrs: Vec<*mut u32> = bufs
            .iter()
            .map(|b| unsafe { (*b.0.get()).as_mut_ptr() })
            .collect();
        let groups = invocations.div_ceil(64);
        let (gx, gy) = if groups <= 65_535 {
            (groups, 1)
        } else {
            (65_535, groups.div_ceil(65_535))
        };
        unsafe {
            let at: libloading::Symbol<At> = self.lib.get(b"emu_at\0").unwrap();
            let name = format!("{op}\0");
            macro_rules! run {
                ($($i:tt),*) => {{
                    type K = unsafe extern "C" fn(P, $(run!(@ptr $i)),*);
                    let k: libloading::Symbol<K> = self.lib.get(name.as_bytes()).unwrap();
                    for by in 0..gy {
                        for bx in 0..gx {
                            for tx in 0..64 {
                                at(bx as u32, by as u32, gx as u32, gy as u32, tx);
                                k(p, $(ptrs[$i]),*);
                            }
                        }
                    }
                }};
                (@ptr $i:tt) => { *mut u32 };
            }
            match ptrs.len() {
                1 => run!(0),
                2 => run!(0, 1),
                3 => run!(0, 1, 2),
                4 => run!(0, 1, 2, 3),
                5 => run!(0, 1, 2, 3, 4),
                n => panic!("{op}: {n} buffers"),
            }
        }
    }

    fn download(&self, b: &EmuBuf, start: usize, len: usize, out: &mut Vec<f32>) {
        // SAFETY: no launch runs during a download.
        let v = unsafe { &*b.0.get() };
        out.clear();
        out.extend(v[start..start + len].iter().map(|&w| f32::from_bits(w)));
    }

    fn status(&self) -> kin_infer_core::Result<()> {
        Ok(())
    }
}

fn emulator() -> Option<GpuBackend<Emu>> {
    let lib = build()?;
    // SAFETY: the library is the kernel source just built, with no initialisers.
    let lib = unsafe { libloading::Library::new(&lib) }.expect("load the emulated kernels");
    let info = GpuDevice {
        name: "CUDA kernels emulated on the CPU".into(),
        backend: "cuda-emu".into(),
        kind: "software (CPU)".into(),
        driver: String::new(),
        software: true,
        max_buffer_bytes: u64::MAX,
    };
    Some(GpuBackend::with_device(Emu { lib, info }).unwrap())
}

#[test]
fn the_cuda_kernels_compute_every_op_like_the_cpu() {
    let Some(be) = emulator() else { return };
    assert_eq!(be.name(), "cuda-emu");
    gpu_suite::linear_and_matmul(&be);
    gpu_suite::half_weights(&be);
    gpu_suite::norms_activations_and_elementwise(&be);
    gpu_suite::gathers_rope_and_pooling(&be);
    gpu_suite::attention_and_convolution(&be);
}
