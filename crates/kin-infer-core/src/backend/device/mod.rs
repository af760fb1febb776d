//! The GPU backends: one implementation of the seam ([`ops`]) over a small [`Device`] trait
//! that each GPU API implements (buffers, kernel launches, reads), and one kernel set per
//! shader language with the same names and parameter layouts: WGSL for wgpu ([`wgsl`]:
//! Vulkan, Metal, DX12) and CUDA C for the CUDA driver API ([`cuda_kernels`]).
//!
//! The whole forward pass stays on the device: tensors are device buffers, token ids and other
//! small per-call tables go up with each op, and only [`GpuCompute::read`] brings floats back
//! (embeddings, logits). Every op addresses its tensors by element offsets passed with its
//! parameters, so views never need aligned binding offsets.
//!
//! Numerics: one invocation computes one output element (or one row) with a sequential loop, so
//! each element is reduced in one fixed order whatever the batch (no atomics): results are
//! identical run to run and across batch compositions on one device, and held to the goldens'
//! tolerance against PyTorch. The CPU backend stays the bit-reproducible one.
//!
//! Failures (validation, out of memory, device lost, a launch error) are recorded, not raised
//! inside an op: after the first one nothing more runs, reads return NaN (never stale
//! numbers), and [`GpuCompute::check`], which the engine calls after each forward pass, reports
//! it as [`InferError::Device`](crate::error::InferError::Device).

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod bodies;
#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod dialect;
mod ops;
mod ops_seq;
mod params;
mod upload;

pub use upload::DeviceMatrixPart;

#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(feature = "cuda")]
mod cuda_kernels;
#[cfg(feature = "wgpu")]
pub mod wgpu;
#[cfg(feature = "wgpu")]
mod wgsl;

use super::{DeviceMatrix, GpuDevice, Inner, Storage, Tensor, View, ViewMut};
use crate::error::Result;
use crate::kernels::Tier;

/// Invocations per workgroup / CUDA block, for every kernel (the kernels number invocations
/// over a 2-D grid of these: one dimension alone stops at 65,535 groups).
pub(crate) const GROUP: usize = 64;

/// The largest number of parameter words a kernel takes.
pub(crate) const MAX_PARAMS: usize = 16;

/// A device buffer of one of the compiled-in GPU backends.
pub enum DeviceBuf {
    #[cfg(feature = "wgpu")]
    Wgpu(::wgpu::Buffer),
    #[cfg(feature = "cuda")]
    Cuda(cudarc::driver::CudaSlice<u32>),
    /// A [`Device`] defined outside this crate (the CUDA kernels' CPU emulator in
    /// tests/cuda_emu.rs): its buffer type, downcast by its own [`Device::buf`].
    Other(Box<dyn std::any::Any + Send + Sync>),
}

/// A tensor's device storage: a buffer of 32-bit words and the floats it holds.
pub struct DeviceTensor {
    pub(crate) buf: DeviceBuf,
    pub(crate) len: usize,
}

/// What a GPU API provides to [`GpuBackend`]. Buffers hold 32-bit words (f32 bits, or u32 for
/// ids and indices); every method records its failure instead of returning it (see the module
/// docs), so ops keep the seam's infallible signatures.
pub trait Device: Send + Sync + Sized + 'static {
    /// The backend's name ("wgpu", "cuda").
    const NAME: &'static str;
    /// The adapter or GPU.
    fn info(&self) -> &GpuDevice;
    /// This API's buffer inside a [`DeviceBuf`] (another API's is a programming error).
    fn buf(b: &DeviceBuf) -> &Self::Buf;
    /// This API's buffer as a [`DeviceBuf`].
    fn wrap(b: Self::Buf) -> DeviceBuf;
    type Buf: Send + Sync + 'static;
    /// `words` zeroed words.
    fn alloc(&self, words: usize) -> Self::Buf;
    /// Host words into a new buffer.
    fn upload(&self, words: &[u32]) -> Self::Buf;
    /// Runs kernel `op` over `invocations` invocations with `params` (at most
    /// [`MAX_PARAMS`]) and `bufs` in the kernel's order.
    fn launch(&self, op: &'static str, params: &[u32], bufs: &[&Self::Buf], invocations: usize);
    /// `len` floats of `b` from element `start`, after every launched op (NaN after a
    /// failure).
    fn download(&self, b: &Self::Buf, start: usize, len: usize, out: &mut Vec<f32>);
    /// The first failure so far, as a typed error.
    fn status(&self) -> Result<()>;
}

/// The seam over a [`Device`]: `GpuBackend<WgpuDevice>` is the wgpu backend,
/// `GpuBackend<CudaDevice>` the CUDA one.
pub struct GpuBackend<D: Device> {
    dev: D,
    tier: Tier,
    /// Bound where an op's optional input is absent (a binding cannot be empty).
    dummy: D::Buf,
}

impl<D: Device> GpuBackend<D> {
    /// The seam over `dev` (the GPU backends' constructors use it; so can a test's device).
    pub fn with_device(dev: D) -> Result<Self> {
        let dummy = dev.alloc(4);
        Ok(GpuBackend {
            dev,
            tier: crate::kernels::kernels()?.tier(),
            dummy,
        })
    }

    /// The adapter or GPU this backend runs on.
    pub fn device_info(&self) -> &GpuDevice {
        self.dev.info()
    }

    fn tensor(&self, b: D::Buf, len: usize) -> Tensor {
        Tensor {
            storage: Storage::Device(Box::new(DeviceTensor {
                buf: D::wrap(b),
                len,
            })),
        }
    }
}

/// The CPU's erf and tanh constants (`kernels::math`) as `(name, value)`, written into both
/// kernel languages so that every backend evaluates the same polynomials.
pub(crate) fn math_constants() -> Vec<(String, f32)> {
    use crate::kernels::math::{ERF_BIG, ERF_SMALL, ERF_SPLIT, TANH_P, TANH_SPLIT};
    let mut c = vec![
        ("TANH_SPLIT".to_string(), TANH_SPLIT),
        ("ERF_SPLIT".to_string(), ERF_SPLIT),
    ];
    c.extend(
        TANH_P
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("TANH_P{i}"), *v)),
    );
    c.extend(
        ERF_BIG
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("ERF_B{i}"), *v)),
    );
    c.extend(
        ERF_SMALL
            .iter()
            .enumerate()
            .map(|(i, v)| (format!("ERF_S{i}"), *v)),
    );
    c
}

/// The words of a slice of f32 (their bits), without a copy.
pub(crate) fn words(data: &[f32]) -> &[u32] {
    // SAFETY: f32 and u32 have the same size and alignment and every bit pattern is a valid
    // u32; the slice covers exactly the same memory.
    unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u32>(), data.len()) }
}

/// The device tensor behind a tensor; a host tensor here is a programming error (a model
/// mixing backends), not bad input.
pub(crate) fn dev(t: &Tensor) -> &DeviceTensor {
    match &t.storage {
        Storage::Device(b) => b,
        _ => panic!("a host tensor given to a GPU backend"),
    }
}

/// A size or element offset as a kernel parameter word.
pub(crate) fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a tensor index past u32 on the GPU")
}

/// The buffer and element offset of a view.
pub(crate) fn at<'a, D: Device>(v: &View<'a>) -> (&'a D::Buf, u32) {
    (D::buf(&dev(v.t).buf), u(v.start))
}

pub(crate) fn at_mut<'a, D: Device>(v: &'a ViewMut<'_>) -> (&'a D::Buf, u32) {
    (D::buf(&dev(v.t).buf), u(v.start))
}

pub(crate) fn whole<D: Device>(t: &Tensor) -> &D::Buf {
    D::buf(&dev(t).buf)
}

pub(crate) fn groups(m: &DeviceMatrix) -> &[DeviceMatrixPart] {
    match &m.inner {
        Inner::Device(g) => g,
        Inner::Cpu(_) => panic!("a CPU matrix given to a GPU backend"),
    }
}
