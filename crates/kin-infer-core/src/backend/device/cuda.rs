//! The CUDA device (cargo feature `cuda`): the driver API through `cudarc`, loaded at run time,
//! so building needs no CUDA toolkit and a machine without the driver gets a typed error.
//!
//! The kernels ([`super::cuda_kernels`]) ship as PTX (`kernels.ptx`, generated from that source
//! by NVRTC 12.0 for `compute_70`: scripts/gen-cuda-ptx.sh; a test checks it is current), which
//! the driver compiles for the GPU at load, so only the driver is needed at run time (no NVRTC,
//! no toolkit). Everything runs on the context's default stream, in program order.

use super::{cuda_kernels, Device, DeviceBuf, GpuBackend, GROUP, MAX_PARAMS};
use crate::backend::GpuDevice;
use crate::error::{InferError, Result};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The CUDA backend.
pub type CudaCompute = GpuBackend<CudaDevice>;

/// The kernels as PTX (ISA of NVRTC 12.0, `compute_70`): every driver since CUDA 12.0 loads it.
pub const PTX: &str = include_str!("kernels.ptx");

/// The options the PTX is generated with (scripts/gen-cuda-ptx.sh, the staleness test).
pub const NVRTC_ARCH: &str = "compute_70";

/// The CUDA C source of the kernels (what `kernels.ptx` is compiled from).
pub fn kernel_source() -> String {
    cuda_kernels::source()
}

/// One GPU's context and stream, with the kernels loaded.
pub struct CudaDevice {
    stream: Arc<CudaStream>,
    functions: HashMap<&'static str, CudaFunction>,
    info: GpuDevice,
    failure: Mutex<Option<String>>,
}

/// A kernel's parameter words, passed by value (its `struct P_<kernel>` in the CUDA source,
/// padded to this size).
#[repr(C)]
#[derive(Clone, Copy)]
struct Params([u32; MAX_PARAMS]);

// SAFETY: a plain array of u32, laid out as the kernels' `P_<kernel>` structs (4-byte fields,
// padded to 16 words).
unsafe impl DeviceRepr for Params {}

/// Whether the CUDA driver library can be loaded here (cudarc panics at first use without it).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

fn driver_err(what: &str, e: impl std::fmt::Display) -> InferError {
    InferError::Device(format!("CUDA: {what}: {e}"))
}

fn describe(ctx: &CudaContext) -> GpuDevice {
    let (major, minor) = ctx.compute_capability().unwrap_or((0, 0));
    let total = ctx.total_mem().unwrap_or(0) as u64;
    GpuDevice {
        name: ctx.name().unwrap_or_else(|_| "CUDA device".into()),
        backend: "cuda".into(),
        kind: format!("CUDA GPU, compute capability {major}.{minor}"),
        driver: "CUDA driver".into(),
        software: false,
        // One allocation may take the whole memory.
        max_buffer_bytes: total,
    }
}

/// The CUDA GPUs present (none without the driver).
pub(crate) fn devices() -> Vec<GpuDevice> {
    if !driver_present() {
        return Vec::new();
    }
    let n = CudaContext::device_count().unwrap_or(0).max(0) as usize;
    (0..n)
        .filter_map(|i| CudaContext::new(i).ok())
        .map(|c| describe(&c))
        .collect()
}

impl GpuBackend<CudaDevice> {
    /// GPU `ordinal`; a typed error without a driver or device, or if the kernels do not load.
    pub fn new(ordinal: usize) -> Result<Self> {
        if !driver_present() {
            return Err(InferError::Unsupported(
                "no CUDA driver on this machine (libcuda could not be loaded)".into(),
            ));
        }
        let count = CudaContext::device_count().map_err(|e| driver_err("counting devices", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(InferError::Unsupported(format!(
                "no CUDA device {ordinal} ({count} present)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| driver_err("creating a context", e))?;
        let module = ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(PTX))
            .map_err(|e| driver_err("loading the kernels' PTX", e))?;
        let mut functions = HashMap::new();
        for name in cuda_kernels::names() {
            let f = module
                .load_function(name)
                .map_err(|e| driver_err(&format!("kernel `{name}`"), e))?;
            functions.insert(name, f);
        }
        GpuBackend::with_device(CudaDevice {
            stream: ctx.default_stream(),
            functions,
            info: describe(&ctx),
            failure: Mutex::new(None),
        })
    }
}

impl CudaDevice {
    fn failed(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        f.get_or_insert_with(|| format!("{what}: {e}"));
    }

    /// A stand-in after a failed allocation: ops no longer run once a failure is recorded.
    fn null(&self) -> CudaSlice<u32> {
        self.stream
            .null::<u32>()
            .expect("an empty CUDA slice needs no memory")
    }
}

impl Device for CudaDevice {
    const NAME: &'static str = "cuda";
    type Buf = CudaSlice<u32>;

    fn info(&self) -> &GpuDevice {
        &self.info
    }

    fn buf(b: &DeviceBuf) -> &CudaSlice<u32> {
        match b {
            DeviceBuf::Cuda(b) => b,
            #[allow(unreachable_patterns)]
            _ => panic!("another backend's buffer given to CUDA"),
        }
    }

    fn wrap(b: CudaSlice<u32>) -> DeviceBuf {
        DeviceBuf::Cuda(b)
    }

    fn alloc(&self, words: usize) -> CudaSlice<u32> {
        match self.stream.alloc_zeros::<u32>(words.max(1)) {
            Ok(b) => b,
            Err(e) => {
                self.fail(&format!("allocating {} bytes", words * 4), e);
                self.null()
            }
        }
    }

    fn upload(&self, words: &[u32]) -> CudaSlice<u32> {
        if words.is_empty() {
            return self.alloc(1);
        }
        match self.stream.clone_htod(words) {
            Ok(b) => b,
            Err(e) => {
                self.fail(&format!("uploading {} bytes", words.len() * 4), e);
                self.null()
            }
        }
    }

    fn launch(
        &self,
        op: &'static str,
        params: &[u32],
        bufs: &[&CudaSlice<u32>],
        invocations: usize,
    ) {
        if invocations == 0 || self.failed() {
            return;
        }
        let f = &self.functions[op];
        let mut p = Params([0; MAX_PARAMS]);
        p.0[..params.len()].copy_from_slice(params);
        let groups = invocations.div_ceil(GROUP);
        let (x, y) = if groups <= 65_535 {
            (groups, 1)
        } else {
            (65_535, groups.div_ceil(65_535))
        };
        let cfg = LaunchConfig {
            grid_dim: (x as u32, y as u32, 1),
            block_dim: (GROUP as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = self.stream.launch_builder(f);
        b.arg(&p);
        for buf in bufs {
            b.arg(*buf);
        }
        // SAFETY: every kernel takes its `P_<kernel>` then exactly these buffers in this order
        // (the layouts of `params.rs`), and bounds each index by its parameters.
        if let Err(e) = unsafe { b.launch(cfg) } {
            self.fail(&format!("launching `{op}`"), e);
        }
    }

    fn download(&self, b: &CudaSlice<u32>, start: usize, len: usize, out: &mut Vec<f32>) {
        out.clear();
        if len == 0 {
            return;
        }
        if !self.failed() {
            let mut host = vec![0u32; len];
            let got = self
                .stream
                .memcpy_dtoh(&b.slice(start..start + len), &mut host)
                .and_then(|()| self.stream.synchronize());
            match got {
                Ok(()) => {
                    out.extend(host.into_iter().map(f32::from_bits));
                    return;
                }
                Err(e) => self.fail("reading a result back", e),
            }
        }
        out.resize(len, f32::NAN);
    }

    fn status(&self) -> Result<()> {
        match &*self.failure.lock().unwrap_or_else(|p| p.into_inner()) {
            Some(e) => Err(InferError::Device(format!("{}: {e}", self.info.name))),
            None => Ok(()),
        }
    }
}
