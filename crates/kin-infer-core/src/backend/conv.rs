//! Grouped 1-D convolution with same padding over the positions of each sequence, zero
//! beyond each sequence's own ends (DeBERTa-v2's `ConvLayer`, whose padded reference
//! multiplies pad rows by the mask; inMotion sigreg's stem and residual convolutions). Per
//! group: im2col rows `(tap, channel)`, then one GEMM against the group's packed weight.

use super::cpu_views::whole;
use super::{DeviceMatrix, SeqSpan, Tensor};
use crate::kernels::Kernels;
use std::cell::Cell;

thread_local! {
    /// im2col rows and one group's output, reused: after the first call of a given size the
    /// convolution allocates nothing (the edge runtime's contract). Taken out of the cell for
    /// the call (the GEMM inside may fork and let this thread run another convolution).
    static SCRATCH: Cell<Option<(Vec<f32>, Vec<f32>)>> = const { Cell::new(None) };
}

/// Scratch larger than this (floats) is dropped after the call, not kept for the thread's life.
const KEEP_FLOATS: usize = 1 << 22;

/// A grouped convolution's geometry and weights, as [`super::GpuCompute::grouped_conv1d`]
/// takes them: `channels` inputs per row, taps `kernel`, one prepared weight per group and
/// the `bias` of all `groups.len() · o` outputs.
#[derive(Clone, Copy)]
pub struct GroupedConv<'a> {
    pub channels: usize,
    pub kernel: usize,
    pub groups: &'a [DeviceMatrix],
    pub bias: &'a Tensor,
}

/// See [`super::GpuCompute::grouped_conv1d`]: `x` rows of `conv.channels` inputs, `out` rows
/// of `groups.len() · o` outputs.
pub(super) fn grouped_conv1d(
    k: &Kernels,
    x: &[f32],
    seqs: &[SeqSpan],
    conv: &GroupedConv,
    out: &mut [f32],
) {
    let GroupedConv {
        channels,
        kernel,
        groups,
        bias,
    } = *conv;
    let bias = whole(bias);
    let h = channels;
    let total = x.len() / h;
    let pad = (kernel - 1) / 2;
    let cg = h / groups.len();
    let og = groups[0].n;
    let width = og * groups.len();
    let mut scratch = SCRATCH.take().unwrap_or_default();
    {
        let (cols, part) = &mut scratch;
        cols.resize(total * kernel * cg, 0.0);
        for (g, w) in groups.iter().enumerate() {
            // A conv weight is prepared as one f32 matrix: one column group.
            let packed = &super::cpu_views::cpu_groups(w)[0];
            assert_eq!(
                (w.n, w.k),
                (og, kernel * cg),
                "grouped_conv1d: group weight shape"
            );
            cols.fill(0.0);
            for sp in seqs {
                for t in 0..sp.len {
                    let row = &mut cols[(sp.start + t) * kernel * cg..][..kernel * cg];
                    for tap in 0..kernel {
                        let src = t as isize + tap as isize - pad as isize;
                        if src >= 0 && (src as usize) < sp.len {
                            let from = (sp.start + src as usize) * h + g * cg;
                            row[tap * cg..(tap + 1) * cg].copy_from_slice(&x[from..from + cg]);
                        }
                    }
                }
            }
            let b = &bias[g * og..(g + 1) * og];
            if groups.len() == 1 {
                // One group: the GEMM writes the output rows directly (same values).
                k.matmul(
                    cols,
                    kernel * cg,
                    total,
                    packed,
                    Some(b),
                    &mut out[..total * og],
                    og,
                );
                continue;
            }
            part.resize(total * og, 0.0);
            k.matmul(cols, kernel * cg, total, packed, Some(b), part, og);
            for (dst, src) in out[..total * width]
                .chunks_exact_mut(width)
                .zip(part.chunks_exact(og))
            {
                dst[g * og..(g + 1) * og].copy_from_slice(src);
            }
        }
    }
    if scratch.0.capacity() + scratch.1.capacity() <= KEEP_FLOATS {
        SCRATCH.set(Some(scratch));
    }
}
