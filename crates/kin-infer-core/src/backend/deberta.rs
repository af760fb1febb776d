//! DeBERTa's operations (the `DeBERTa ops` block of [`GpuCompute`](super::GpuCompute)): the
//! data they are described by ([`DisentangledTerms`]) and their CPU implementations, which
//! [`CpuCompute`](super::CpuCompute) calls.
//!
//! - [`divide_columns`]: transformers divides q (v1) or k (v2) of the fused `[q | k | v]` by
//!   `sqrt(head_dim · scale_factor)` before the products; a division, not a multiply by the
//!   reciprocal, so the bits are torch's.
//! - DeBERTa-v2's `ConvLayer` is the shared `grouped_conv1d` (backend/conv.rs).
//! - [`disentangled_bias`]: the content→position and position→content scores of every
//!   (sequence, head), `len × len` each, into one buffer that attention then adds
//!   ([`AttnBias::Dense`](super::AttnBias::Dense)).

use super::cpu_views::host;
use super::{SeqSpan, Tensor};
use crate::kernels::Kernels;
use rayon::prelude::*;

/// DeBERTa's disentangled relative-position terms, as data. For query `i` and key `j` of one
/// sequence, with `r = index[(i − j) + max_len − 1]` a row of the tables (depending only on
/// `i − j`, never on the batch), and `q`, `k` the head's slices of the fused `[q | k | v]`:
///
/// ```text
/// c2p(i, j) = q_i · pos_key[r]        p2c(i, j) = k_j · pos_query[r]
/// bias(i, j) = c2p(i, j) + p2c(i, j)  (each term divided by `divide_by` first, if given)
/// ```
///
/// Each product accumulates the head dimension in order (as the GEMM does); a missing table
/// drops its term.
pub struct DisentangledTerms<'a> {
    /// The layer's heads, each `head_dim` wide in the fused `[q | k | v]` rows.
    pub heads: usize,
    pub head_dim: usize,
    /// c2p table `[rows, heads · head_dim]` (v1 `pos_proj(rel)`, v2 `pos_key_proj(rel)` or
    /// `key_proj(rel)`).
    pub pos_key: Option<&'a Tensor>,
    /// p2c table `[rows, heads · head_dim]` (v1 `pos_q_proj(rel) / scale`, v2
    /// `pos_query_proj(rel)` or `query_proj(rel)`).
    pub pos_query: Option<&'a Tensor>,
    /// Table row of each relative position `i − j` in `−(max_len − 1) ..= max_len − 1`, at
    /// `(i − j) + max_len − 1` (clamped positions or v2's log buckets, computed at load).
    pub index: &'a [u32],
    /// The longest sequence the index covers.
    pub max_len: usize,
    /// v2 divides each term by `sqrt(head_dim · scale_factor)` before adding them.
    pub divide_by: Option<f32>,
}

/// Where each sequence's `heads × len × len` block starts in a dense bias over `seqs`.
pub(super) fn dense_offsets(seqs: &[SeqSpan], heads: usize) -> Vec<usize> {
    seqs.iter()
        .scan(0, |at, s| {
            let start = *at;
            *at += heads * s.len * s.len;
            Some(start)
        })
        .collect()
}

/// Divides columns `from..from + width` of every `stride`-wide row of `x` by `s`.
pub(super) fn divide_columns(x: &mut [f32], stride: usize, from: usize, width: usize, s: f32) {
    x.par_chunks_mut(stride * 64).for_each(|rows| {
        for row in rows.chunks_exact_mut(stride) {
            row[from..from + width].iter_mut().for_each(|v| *v /= s);
        }
    });
}

/// The disentangled bias of every (sequence, head) of `seqs` into `out`, sequence-major, each
/// `heads × len × len` (query rows, key columns), as [`super::AttnBias::Dense`] reads it.
pub(super) fn disentangled_bias(
    k: &Kernels,
    qkv: &[f32],
    seqs: &[SeqSpan],
    terms: &DisentangledTerms,
    out: &mut [f32],
) {
    let heads = terms.heads;
    let p = Params {
        heads,
        head_dim: terms.head_dim,
        pos_key: terms.pos_key.map(|t| host(&t.view())),
        pos_query: terms.pos_query.map(|t| host(&t.view())),
        index: terms.index,
        max_len: terms.max_len,
        divide_by: terms.divide_by,
    };
    assert_eq!(p.index.len(), 2 * p.max_len - 1, "disentangled_bias: index");
    let mut blocks = Vec::with_capacity(seqs.len() * heads);
    let mut rest = out;
    for sp in seqs {
        assert!(sp.len <= p.max_len, "disentangled_bias: sequence too long");
        for h in 0..heads {
            let (block, tail) = std::mem::take(&mut rest).split_at_mut(sp.len * sp.len);
            blocks.push((*sp, h, block));
            rest = tail;
        }
    }
    blocks
        .into_par_iter()
        .for_each(|(sp, h, block)| seq_head_bias(k, &p, qkv, sp, h, block));
}

/// [`DisentangledTerms`] resolved to host memory.
struct Params<'a> {
    heads: usize,
    head_dim: usize,
    pos_key: Option<&'a [f32]>,
    pos_query: Option<&'a [f32]>,
    index: &'a [u32],
    max_len: usize,
    divide_by: Option<f32>,
}

impl Params<'_> {
    /// `idx(d)` for `d` in `-(len-1) ..= len-1`, in that order.
    fn around(&self, len: usize) -> &[u32] {
        &self.index[self.max_len - len..self.max_len + len - 1]
    }

    #[inline]
    fn get(&self, delta: isize) -> usize {
        self.index[(delta + self.max_len as isize - 1) as usize] as usize
    }
}

/// `bias[i·len + j] = c2p(i, j) + p2c(i, j)` of one sequence and head. `qkv` holds per token
/// `[q | k | v]` (q already divided by the scale in v1, k not yet in v2).
///
/// Query `i` only reaches table rows `idx(i-(len-1)) ..= idx(i)`, a band of the full
/// `len × (2·len-1)` product, so the GEMM runs per block of queries (keys for p2c) over that
/// block's window of rows (about half the work for long sequences). Every element of a GEMM
/// is computed the same way whatever the shapes, so the blocking changes no bit.
fn seq_head_bias(
    k: &Kernels,
    p: &Params,
    qkv: &[f32],
    span: SeqSpan,
    head: usize,
    bias: &mut [f32],
) {
    let hidden = p.heads * p.head_dim;
    let stride = 3 * hidden;
    let len = span.len;
    let last = len as isize - 1;
    let base = span.start * stride + head * p.head_dim;
    let (_, nr) = k.gemm_tile();
    let block = nr * (32 / nr).max(1);
    let mut buf = Vec::new();
    // Table rows `wlo..=whi` (this head's columns) times the rows `r0..r1` of q (col 0) or
    // k (col hidden), transposed: `buf[(r - wlo)·n + (i - r0)]`, each divided by the scale in
    // v2. Only the few q/k rows are packed; the table is read in place. (`fma(a, b, c)` is
    // symmetric, so each element has the bits of `q_i · table_r` accumulated in order.)
    let term = |buf: &mut Vec<f32>,
                table: &[f32],
                col: usize,
                r0: usize,
                r1: usize,
                wlo: usize,
                whi: usize| {
        let n = r1 - r0;
        let packed = k.pack_rows(&qkv[base + r0 * stride + col..], n, p.head_dim, stride);
        buf.clear();
        buf.resize((whi - wlo + 1) * n, 0.0);
        k.matmul(
            &table[wlo * hidden + head * p.head_dim..],
            hidden,
            whi - wlo + 1,
            &packed,
            None,
            buf,
            n,
        );
        if let Some(s) = p.divide_by {
            buf.iter_mut().for_each(|v| *v /= s);
        }
        n
    };
    let idx = |d: isize| p.get(d);
    // rel[d + last] = idx(d) for d in -last..=last
    let rel = p.around(len);
    if p.pos_key.is_none() && p.pos_query.is_none() {
        bias.fill(0.0);
    }
    // c2p: a block of queries i0..i1 reaches rows idx(i0 - last) ..= idx(i1 - 1)
    if let Some(table) = p.pos_key {
        for i0 in (0..len).step_by(block) {
            let i1 = (i0 + block).min(len);
            let wlo = idx(i0 as isize - last);
            let n = term(&mut buf, table, 0, i0, i1, wlo, idx(i1 as isize - 1));
            for i in i0..i1 {
                // rows[len-1-j] = idx(i - j)
                let rows = &rel[i..i + len];
                for (b, &r) in bias[i * len..][..len].iter_mut().zip(rows.iter().rev()) {
                    *b = buf[(r as usize - wlo) * n + (i - i0)];
                }
            }
        }
    }
    // p2c: a block of keys j0..j1 reaches rows idx(-(j1 - 1)) ..= idx(last - j0)
    if let Some(table) = p.pos_query {
        let add = p.pos_key.is_some();
        for j0 in (0..len).step_by(block) {
            let j1 = (j0 + block).min(len);
            let wlo = idx(-(j1 as isize - 1));
            let hi = idx(last - j0 as isize);
            let n = term(&mut buf, table, hidden, j0, j1, wlo, hi);
            for i in 0..len {
                let row = &mut bias[i * len..][j0..j1];
                // rows[j1-1-j] = idx(i - j) for j in j0..j1
                let rows = &rel[i + last as usize + 1 - j1..i + last as usize + 1 - j0];
                for (jj, (b, &r)) in row.iter_mut().zip(rows.iter().rev()).enumerate() {
                    let v = buf[(r as usize - wlo) * n + jj];
                    // transformers: c2p + p2c
                    *b = if add { *b + v } else { v };
                }
            }
        }
    }
}
