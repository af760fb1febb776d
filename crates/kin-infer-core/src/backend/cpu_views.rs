//! The CPU backend's views of seam values: a tensor view as its host slice, a matrix as its
//! packed column groups. A leaf under `cpu.rs`, `conv.rs` and `deberta.rs`, which all read them
//! (so none of them imports another for it).

use super::{DeviceMatrix, Inner, Storage, Tensor, View, ViewMut};
use crate::kernels::PackedMatrix;

/// The host slice of a view. A tensor of another backend here is a programming error (a model
/// mixing backends), not bad input.
pub(crate) fn host<'a>(v: &View<'a>) -> &'a [f32] {
    match &v.t.storage {
        Storage::Host(d) => &d[v.start..v.start + v.len],
        Storage::Mapped(d) => &d.as_slice()[v.start..v.start + v.len],
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        Storage::Device(_) => panic!("a GPU tensor given to the CPU backend"),
    }
}

/// The host slice of a whole tensor.
pub(crate) fn whole(t: &Tensor) -> &[f32] {
    host(&t.view())
}

pub(crate) fn host_mut<'a>(v: ViewMut<'a>) -> &'a mut [f32] {
    let (start, len) = (v.start, v.len);
    match &mut v.t.storage {
        Storage::Host(d) => &mut d[start..start + len],
        Storage::Mapped(_) => panic!("mapped weights are read-only"),
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        Storage::Device(_) => panic!("a GPU tensor given to the CPU backend"),
    }
}

/// The packed column groups of a CPU matrix.
pub(crate) fn cpu_groups(m: &DeviceMatrix) -> &[PackedMatrix] {
    match &m.inner {
        Inner::Cpu(g) => g,
        #[cfg(any(feature = "wgpu", feature = "cuda"))]
        Inner::Device(_) => panic!("a GPU matrix given to the CPU backend"),
    }
}
