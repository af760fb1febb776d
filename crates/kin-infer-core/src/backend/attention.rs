//! The CPU backend's attention: bidirectional over a packed batch (encoders) and causal over a
//! KV cache (decoders).
//!
//! Causal determinism: every (query, head) runs the same code for prefill and decode: scores
//! over keys `j0..=pos` as one [`Kernels::gemv`] over the transposed keys (each score
//! accumulates the head dimension in order, as a GEMM would), scale, optional softcap, softmax
//! (canonical max/sum, anchored at the first key inside the window), then `Σ_j p_j · v_j` as
//! another gemv (j = 0, 1, … with FMA).

use super::{AttnShape, SeqSpan};
use crate::kernels::{math, Kernels, PackedMatrix};
use rayon::prelude::*;
use std::cell::Cell;

/// Query rows per causal attention pass (bounds the score scratch; results do not depend on
/// it).
pub(super) const ATTN_CHUNK: usize = 16;

/// [`super::AttnBias`] with its table resolved to host memory.
pub(super) enum Bias<'a> {
    Relative {
        table: &'a [f32],
        max_len: usize,
    },
    Alibi {
        slopes: &'a [f32],
    },
    /// `offsets[seq]`: where that sequence's `heads × len × len` block starts.
    Dense {
        bias: &'a [f32],
        offsets: Vec<usize>,
    },
}

impl Bias<'_> {
    /// Adds the bias of (sequence `seq`, head `head`, query `i`) to its scaled score row.
    fn add_row(&self, k: &Kernels, seq: usize, head: usize, i: usize, scores: &mut [f32]) {
        match self {
            Bias::Relative { table, max_len } => {
                let width = 2 * max_len - 1;
                // key j has relative distance j - i, at column (j - i) + max_len - 1.
                let start = head * width + max_len - 1 - i;
                k.add(scores, &table[start..start + scores.len()]);
            }
            Bias::Alibi { slopes } => {
                let m = slopes[head];
                for (j, s) in scores.iter_mut().enumerate() {
                    let d = i.abs_diff(j) as f32;
                    *s += -(m * d);
                }
            }
            Bias::Dense { bias, offsets } => {
                let len = scores.len();
                let start = offsets[seq] + (head * len + i) * len;
                k.add(scores, &bias[start..start + len]);
            }
        }
    }
}

/// One (sequence, head) task's buffers, kept per thread and reused: after the first call of a
/// given size, attention allocates nothing on the serial path (the edge runtime's contract).
struct HeadScratch {
    keys: PackedMatrix,
    values: PackedMatrix,
    scores: Vec<f32>,
    ctx: Vec<f32>,
}

thread_local! {
    static HEAD: Cell<Option<HeadScratch>> = const { Cell::new(None) };
}

/// Scratch larger than this (floats, all buffers together) is dropped after the call rather
/// than kept for the thread's life (a 4096-token sequence's scores alone are 16 M floats).
const KEEP_FLOATS: usize = 1 << 22;

/// Attention of head `h` of sequence `s` into `sc.ctx` (`len × head_dim`).
#[allow(clippy::too_many_arguments)]
fn head(
    k: &Kernels,
    qkv: &[f32],
    seqs: &[SeqSpan],
    (s, h): (usize, usize),
    heads: usize,
    head_dim: usize,
    scale: f32,
    bias: Option<&Bias>,
    sc: &mut HeadScratch,
) {
    let hidden = heads * head_dim;
    let stride = 3 * hidden;
    let SeqSpan { start, len } = seqs[s];
    let base = start * stride + h * head_dim;
    let q = &qkv[base..];
    k.pack_rows_into(&mut sc.keys, &qkv[base + hidden..], len, head_dim, stride);
    sc.scores.resize(len * len, 0.0);
    k.matmul(q, stride, len, &sc.keys, None, &mut sc.scores, len);
    for (i, row) in sc.scores.chunks_exact_mut(len).enumerate() {
        match bias {
            Some(b) => {
                k.scale(row, scale);
                b.add_row(k, s, h, i, row);
                k.softmax(row);
            }
            None => k.softmax_scaled(row, scale),
        }
    }
    // Packing v (O(len · head_dim)) buys the GEMM's register blocking for p · v
    // (O(len² · head_dim)); `Kernels::matmul_unpacked` gives the same bits without the
    // copy but runs row by row, measured 35% slower on T5's 12-wide heads.
    k.pack_cols_into(
        &mut sc.values,
        &qkv[base + 2 * hidden..],
        len,
        head_dim,
        stride,
    );
    sc.ctx.resize(len * head_dim, 0.0);
    k.matmul(
        &sc.scores,
        len,
        len,
        &sc.values,
        None,
        &mut sc.ctx,
        head_dim,
    );
}

/// Runs `f` with this thread's head scratch. The scratch is taken out of its cell for the
/// call, not borrowed: the GEMM inside may fork, and while it waits rayon can run another
/// head task on this thread, which then finds the cell empty and uses a fresh scratch.
fn with_scratch<R>(f: impl FnOnce(&mut HeadScratch) -> R) -> R {
    let mut sc = HEAD.take().unwrap_or_else(|| HeadScratch {
        keys: PackedMatrix::empty(),
        values: PackedMatrix::empty(),
        scores: Vec::new(),
        ctx: Vec::new(),
    });
    let r = f(&mut sc);
    let kept = sc.scores.capacity()
        + sc.ctx.capacity()
        + (sc.keys.k() * sc.keys.n())
        + (sc.values.k() * sc.values.n());
    if kept <= KEEP_FLOATS {
        HEAD.set(Some(sc));
    }
    r
}

/// Copies one head's context rows into their columns of `out`.
fn scatter(ctx: &[f32], span: SeqSpan, h: usize, head_dim: usize, hidden: usize, out: &mut [f32]) {
    for i in 0..span.len {
        let dst = (span.start + i) * hidden + h * head_dim;
        crate::kernels::copy_short(
            &mut out[dst..dst + head_dim],
            &ctx[i * head_dim..(i + 1) * head_dim],
        );
    }
}

/// Multi-head self-attention inside each sequence of a packed `[q | k | v]` batch. Inside a
/// rayon pool the (sequence, head) tasks run in parallel; outside one (the single-threaded
/// edge runtime) they run in order on the calling thread, without allocating. Each task
/// computes the same bits either way.
#[allow(clippy::too_many_arguments)]
pub(super) fn bidirectional(
    k: &Kernels,
    qkv: &[f32],
    seqs: &[SeqSpan],
    heads: usize,
    head_dim: usize,
    scale: f32,
    bias: Option<&Bias>,
    out: &mut [f32],
) {
    let hidden = heads * head_dim;
    if rayon::current_thread_index().is_none() {
        with_scratch(|sc| {
            for s in 0..seqs.len() {
                for h in 0..heads {
                    head(k, qkv, seqs, (s, h), heads, head_dim, scale, bias, sc);
                    scatter(&sc.ctx, seqs[s], h, head_dim, hidden, out);
                }
            }
        });
        return;
    }
    let tasks: Vec<(usize, usize)> = (0..seqs.len())
        .flat_map(|s| (0..heads).map(move |h| (s, h)))
        .collect();
    let results: Vec<Vec<f32>> = tasks
        .par_iter()
        .map(|&task| {
            with_scratch(|sc| {
                head(k, qkv, seqs, task, heads, head_dim, scale, bias, sc);
                sc.ctx.clone()
            })
        })
        .collect();
    for (&(s, h), ctx) in tasks.iter().zip(&results) {
        scatter(ctx, seqs[s], h, head_dim, hidden, out);
    }
}

/// Causal attention of `rows` query rows at positions `start..start + rows` over one layer's
/// cached keys (`[kv_heads · head_dim, capacity]`) and values (`[capacity, kv_heads ·
/// head_dim]`); see [`super::GpuCompute::causal_attention`].
#[allow(clippy::too_many_arguments)]
pub(super) fn causal(
    k: &Kernels,
    shape: &AttnShape,
    q: &[f32],
    q_stride: usize,
    rows: usize,
    start: usize,
    keys: &[f32],
    values: &[f32],
    capacity: usize,
    scores: &mut [f32],
    out: &mut [f32],
) {
    let AttnShape {
        heads,
        kv_heads,
        head_dim: hd,
        scale,
        window,
        softcap,
    } = *shape;
    let q_dim = heads * hd;
    let kv_dim = kv_heads * hd;
    let group = heads / kv_heads;
    let mut c0 = 0;
    while c0 < rows {
        let cr = ATTN_CHUNK.min(rows - c0);
        out[c0 * q_dim..(c0 + cr) * q_dim]
            .par_chunks_mut(hd)
            .zip(scores[..cr * heads * capacity].par_chunks_mut(capacity))
            .enumerate()
            .for_each(|(t, (o, s))| {
                let r = c0 + t / heads;
                let h = t % heads;
                let g = h / group;
                let n = start + r + 1;
                // first key inside the window
                let j0 = window.map_or(0, |w| n.saturating_sub(w));
                let qv = &q[r * q_stride + h * hd..][..hd];
                let s = &mut s[..n - j0];
                // Scores of keys j0..n: q · K (keys transposed), in the GEMM's k order.
                k.gemv(qv, &keys[g * hd * capacity + j0..], capacity, s);
                match softcap {
                    Some(cap) => {
                        k.scale(s, scale);
                        for v in s.iter_mut() {
                            *v = math::tanh(*v / cap) * cap;
                        }
                        k.softmax(s);
                    }
                    None => k.softmax_scaled(s, scale),
                }
                // o = Σ_j p_j · v_j, j in order.
                k.gemv(s, &values[j0 * kv_dim + g * hd..], kv_dim, o);
            });
        c0 += cr;
    }
}
