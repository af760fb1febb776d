//! The q8 numerics mode's product (`kin-numerics/1+q8/1`): `C = A·Bᵀ + bias` over weights
//! kept as the file stores them (each output's row of ggml blocks, contiguous: no f32 copy,
//! and no repacking per tier), with every row of A quantized once per call into 8-bit
//! blocks (`q8_act.rs`) and each output accumulated block by block as `q8_dot.rs` defines.
//!
//! Each output depends only on its weight row and its activation row, through the fixed
//! per-block sequence of the definition: threads split columns, never a reduction, and no
//! tile, chunk or m changes what one output computes. A tier's kernel ([`Q8Kernel`]) computes
//! a run of adjacent outputs of one row with the twin's bits; a type it does not cover runs
//! the generic twin.

use super::gemm::{Product, SendPtr, SERIAL_MACS};
use super::ggml::GgmlType;
use super::q8_act::QuantRow;
use super::{assert_fits, q8_dot, q8_lanes, Ops};
use rayon::prelude::*;
use std::borrow::Cow;

/// One call of a tier's q8 kernel ([`Q8Kernel`], whose contract this is, stated once):
/// `out[r·ldo + c]` for one group of `cols` (at most [`GROUP`]) weight
/// rows of `row_bytes` bytes each, stored interleaved block by block at `w` (block `b` of
/// row `c` at `(b·cols + c)·block_bytes`: see [`Rows`]) or, if `lanes`, in the lane layout
/// (`q8_lanes.rs`: [`GROUP`] rows stored whatever `cols`), against each quantized activation
/// row `a[r]` (at most [`ROWS`] of them; no bias). Returns false, writing nothing, for a type
/// the tier leaves to the generic twin. Several activation rows per call let a kernel unpack
/// each weight block once for all of them (a prompt's rows); every output is still its own
/// dot, the same bits for any number of rows.
///
/// # Safety
/// `w` must hold `cols · row_bytes` readable bytes and `out` `(a.len() − 1)·ldo + cols`
/// writable floats; the tier's CPU features must be present (the table is built after
/// detection).
#[derive(Clone, Copy)]
pub(crate) struct Q8Call<'a> {
    pub(crate) t: GgmlType,
    pub(crate) w: *const u8,
    pub(crate) row_bytes: usize,
    pub(crate) cols: usize,
    pub(crate) a: &'a [QuantRow],
    pub(crate) out: *mut f32,
    pub(crate) ldo: usize,
    pub(crate) lanes: bool,
}

/// A tier's q8 kernel (the contract: [`Q8Call`]).
pub(crate) type Q8Kernel = unsafe fn(Q8Call) -> bool;

/// Activation rows per kernel call.
pub(crate) const ROWS: usize = 4;

pub(crate) use super::q8_lanes::GROUP;
const COLS: usize = GROUP;

/// The weight rows of a q8 matrix: `n` rows of `row_bytes` bytes (whole blocks of `t`, as
/// stored), in groups of [`GROUP`] rows (the last one shorter) whose blocks are interleaved:
/// a group's block 0 of each row, then block 1 of each, … So a kernel over one group reads
/// one sequential stream (rows read side by side were eight short strided streams: measured
/// at half the read bandwidth on a 32000 × 768 head), and the bytes are still the file's
/// blocks, reordered. A tier whose kernel reads the lane layout (`q8_lanes.rs`) has them
/// packed that way instead (`lanes`; its groups padded to [`GROUP`] rows).
pub(crate) struct Rows<'a> {
    pub(crate) t: GgmlType,
    pub(crate) bytes: &'a [u8],
    pub(crate) row_bytes: usize,
    pub(crate) n: usize,
    pub(crate) lanes: bool,
}

impl Rows<'_> {
    /// The bytes of row `j`'s group and the group's row count.
    pub(crate) fn group(&self, j: usize) -> (&[u8], usize) {
        let g0 = j / GROUP * GROUP;
        let rows = GROUP.min(self.n - g0);
        let stored = if self.lanes { GROUP } else { rows };
        let at = g0 * self.row_bytes;
        (&self.bytes[at..at + stored * self.row_bytes], rows)
    }

    /// Block `b` of row `j`, as the file stores it.
    pub(crate) fn block(&self, j: usize, b: usize) -> Cow<'_, [u8]> {
        let bb = self.t.block_bytes();
        let (g, rows) = self.group(j);
        if self.lanes {
            let mut out = vec![0u8; bb];
            q8_lanes::block(self.t, g, j % GROUP, b, &mut out);
            return Cow::Owned(out);
        }
        let at = (b * rows + j % GROUP) * bb;
        Cow::Borrowed(&g[at..at + bb])
    }

    /// Bytes stored for the `n` rows.
    fn stored_bytes(&self) -> usize {
        stored_rows(self.n, self.lanes) * self.row_bytes
    }
}

/// Rows stored for `n` weight rows: the lane layout pads its last group to [`GROUP`].
pub(crate) fn stored_rows(n: usize, lanes: bool) -> usize {
    if lanes {
        n.div_ceil(GROUP) * GROUP
    } else {
        n
    }
}

/// Packs `rows` (each `row_bytes` bytes of whole blocks of `t`) into [`Rows`]'s interleaved
/// groups, or its lane layout, into `out` (`rows.len() · row_bytes` bytes; lanes: whole
/// groups of [`GROUP`] rows, zeroed).
pub(crate) fn interleave(
    t: GgmlType,
    rows: &[&[u8]],
    row_bytes: usize,
    lanes: bool,
    out: &mut [u8],
) {
    let bb = t.block_bytes();
    if lanes {
        // Groups are independent: the engine's pool (when the load runs in one) packs them
        // side by side; the bytes do not depend on who packed them.
        let out = &mut out[..rows.len().div_ceil(GROUP) * GROUP * row_bytes];
        let pack =
            |(group, dst): (&[&[u8]], &mut [u8])| q8_lanes::pack_group(t, group, row_bytes, dst);
        let pairs = rows
            .par_chunks(GROUP)
            .zip(out.par_chunks_mut(GROUP * row_bytes));
        if rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1 {
            pairs.for_each(pack);
        } else {
            rows.chunks(GROUP)
                .zip(out.chunks_mut(GROUP * row_bytes))
                .for_each(pack);
        }
        return;
    }
    for (gi, group) in rows.chunks(GROUP).enumerate() {
        let dst = &mut out[gi * GROUP * row_bytes..][..group.len() * row_bytes];
        for (c, row) in group.iter().enumerate() {
            for (b, blk) in row.chunks_exact(bb).enumerate() {
                let at = (b * group.len() + c) * bb;
                dst[at..at + bb].copy_from_slice(blk);
            }
        }
    }
}

/// `c[i][j] = bias[j] + dot(w_j, q8(a_i))` for the `p.m` rows of A (see the module doc).
pub(crate) fn matmul(ops: &Ops, p: Product, w: Rows, c: &mut [f32]) {
    let (m, k, n, ldc) = (p.m, p.b.k, p.b.n, p.ldc);
    if m == 0 || n == 0 {
        return;
    }
    assert_fits(c.len(), m, n, ldc, "q8 matmul: c");
    assert_fits(p.a.len(), m, k, p.lda, "q8 matmul: a");
    assert!(
        w.bytes.len() >= w.stored_bytes(),
        "q8 matmul: weights too short"
    );
    if let Some(bias) = p.bias {
        assert!(bias.len() >= n, "q8 matmul: bias shorter than n");
    }
    let act =
        w.t.traits()
            .q8
            .expect("q8 rows of a type without a pairing")
            .0;
    let threads = if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        1
    };
    let groups = n.div_ceil(COLS);
    // Equal tasks, a multiple of the thread count (work stealing evens out the rest).
    let tasks = if threads > 1 && m * n * k >= SERIAL_MACS {
        (2 * threads).min(groups).max(1)
    } else {
        1
    };
    // Each activation row quantized once, by whichever thread (a row's codes are its own).
    let quantize = |i: usize| {
        let mut r = QuantRow::default();
        r.quantize(act, &p.a[i * p.lda..i * p.lda + k]);
        r
    };
    let rows: Vec<QuantRow> = if tasks > 1 && m > 1 {
        (0..m).into_par_iter().map(quantize).collect()
    } else {
        (0..m).map(quantize).collect()
    };
    let cp = SendPtr(c.as_mut_ptr());
    let task = |t: usize| {
        let (g0, g1) = (t * groups / tasks, (t + 1) * groups / tasks);
        for g in g0..g1 {
            let j0 = g * COLS;
            let cols = COLS.min(n - j0);
            let (group_bytes, group_rows) = w.group(j0);
            debug_assert_eq!(group_rows, cols);
            let wp = group_bytes.as_ptr();
            for (q, group) in rows.chunks(ROWS).enumerate() {
                // SAFETY: rows q·ROWS.. of c, columns j0..j0 + cols, inside c (asserted
                // above); tasks own disjoint column groups.
                let out = unsafe { cp.get().add(q * ROWS * ldc + j0) };
                // SAFETY: rows j0..j0+cols of w (asserted above); `group.len()` rows of
                // `cols` outputs at `out`, `ldc` apart.
                let done = ops.q8.is_some_and(|kern| unsafe {
                    kern(Q8Call {
                        t: w.t,
                        w: wp,
                        row_bytes: w.row_bytes,
                        cols,
                        a: group,
                        out,
                        ldo: ldc,
                        lanes: w.lanes,
                    })
                });
                for (r, a) in group.iter().enumerate() {
                    // SAFETY: as `out` above, row r of the group.
                    let o = unsafe { std::slice::from_raw_parts_mut(out.add(r * ldc), cols) };
                    if !done {
                        for (c, o) in o.iter_mut().enumerate() {
                            *o = dot(&w, j0 + c, a);
                        }
                    }
                    if let Some(b) = p.bias {
                        for (o, b) in o.iter_mut().zip(&b[j0..j0 + cols]) {
                            *o += b;
                        }
                    }
                }
            }
        }
    };
    if tasks > 1 {
        (0..tasks).into_par_iter().for_each(task);
    } else {
        task(0);
    }
}

/// One output of the q8 product, generic twin: weight row `j` of `w` against the quantized
/// activation row `a`, bias not included.
///
/// # Panics
/// If the type has no q8 pairing (callers pack only types that do).
pub(crate) fn dot(w: &Rows, j: usize, a: &QuantRow) -> f32 {
    let f = w.t.traits();
    let decode = f.q8.expect("a q8 product over a type without one").1;
    let mut acc = 0.0f32;
    for b in 0..w.row_bytes / f.block_bytes {
        acc = q8_dot::accumulate(&decode(&w.block(j, b)), f.block_len, a, b, acc);
    }
    acc
}
