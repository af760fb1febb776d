//! DeBERTa's disentangled attention terms: relative-position indices (clamped, or v2's log
//! buckets) and the per-(sequence, head) content→position and position→content scores that
//! feed [`GpuCompute::attention`](crate::gpu::GpuCompute::attention) through its
//! [`AttentionBias`] hook.
//!
//! For query `i` and key `j` of one sequence, with `r = idx(i - j)` a row of the relative
//! embedding table (depending only on `i - j`, never on the batch):
//!
//! ```text
//! c2p(i, j) = q_i · pos_key[r]        p2c(i, j) = k_j · pos_query[r]
//! ```
//!
//! Both are computed with the GEMM: `q · pos_keyᵀ` over the window of table rows the
//! sequence can reach (`idx(-(len-1)) ..= idx(len-1)`), then gathered by `r`. The additions
//! follow transformers: `bias = c2p + p2c` (each divided by `sqrt(d · scale_factor)` first in
//! v2; in v1 `q` and `pos_query` are divided before the products), then `scores + bias`.

use crate::gpu::{AttentionBias, SeqSpan};
use crate::kernels::Kernels;
use rayon::prelude::*;

/// `ln(x)` for `x > 0` finite, in f64 from IEEE basic operations only (no platform libm):
/// `x = m·2^e` with `m` in `[√½, √2)`, `ln m = 2·atanh(s)`, `s = (m-1)/(m+1)`, |s| < 0.172.
fn ln_f64(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    // 2·(s + s³/3 + s⁵/5 + …), smallest terms first.
    let mut powers = [0.0f64; 16];
    let mut p = s;
    for slot in powers.iter_mut() {
        *slot = p;
        p *= s2;
    }
    let mut sum = 0.0;
    for (k, &pk) in powers.iter().enumerate().rev() {
        sum += pk / (2 * k + 1) as f64;
    }
    2.0 * sum + e as f64 * std::f64::consts::LN_2
}

/// `ln(x)` of an f32, correctly rounded (except within ~1e-16 of a rounding boundary), as
/// torch's float32 `log` computes it (≤ 1 ulp there).
fn ln_f32(x: f32) -> f32 {
    ln_f64(x as f64) as f32
}

/// transformers' `make_log_bucket_position` for one relative position, step by step in f32
/// as torch computes it (`python/gen_fixtures_deberta.py --check-buckets` compares the two
/// over whole tables of common configurations).
pub(super) fn log_bucket(rel: i64, bucket_size: usize, max_position: usize) -> i64 {
    let mid = (bucket_size / 2) as i64;
    let a = rel.abs();
    if a <= mid {
        return rel;
    }
    let num = ln_f32(a as f32 / mid as f32);
    let den = ln_f32(((max_position - 1) as f64 / mid as f64) as f32);
    let x = num / den * (mid - 1) as f32;
    let log_pos = x.ceil() as i64 + mid;
    rel.signum() * log_pos
}

/// Relative position → row of the relative embedding table, for `i - j` in
/// `-(max_len-1) ..= max_len-1`.
pub(super) struct RelIndex {
    max_len: usize,
    /// `idx[(i - j) + max_len - 1]`
    idx: Vec<u32>,
}

impl RelIndex {
    /// `span`: half the table (`2·span` rows); `buckets`: `Some((position_buckets,
    /// max_relative_positions))` for v2's log buckets.
    pub(super) fn new(max_len: usize, span: usize, buckets: Option<(usize, usize)>) -> Self {
        let n = max_len as i64;
        let idx = (-(n - 1)..n)
            .map(|d| {
                let b = match buckets {
                    Some((size, max_pos)) => log_bucket(d, size, max_pos),
                    None => d,
                };
                (b + span as i64).clamp(0, 2 * span as i64 - 1) as u32
            })
            .collect();
        RelIndex { max_len, idx }
    }

    /// `idx(d)` for `d` in `-(len-1) ..= len-1`, in that order.
    fn around(&self, len: usize) -> &[u32] {
        &self.idx[self.max_len - len..self.max_len + len - 1]
    }

    #[inline]
    fn get(&self, delta: isize) -> usize {
        self.idx[(delta + self.max_len as isize - 1) as usize] as usize
    }
}

/// One layer's position projections of the relative embedding table, `[2·span, hidden]`.
pub(super) struct RelTables {
    /// For c2p: `pos_proj(rel)` (v1), `pos_key_proj(rel)` or `key_proj(rel)` (v2).
    pub pos_key: Option<Vec<f32>>,
    /// For p2c: `pos_q_proj(rel) / scale` (v1), `pos_query_proj(rel)` or `query_proj(rel)` (v2).
    pub pos_query: Option<Vec<f32>>,
}

/// Shapes and the numerics variant of the disentangled terms.
pub(super) struct BiasParams<'a> {
    pub heads: usize,
    pub head_dim: usize,
    /// `sqrt(head_dim · scale_factor)`; v2 divides c2p and p2c by it.
    pub divide_terms_by: Option<f32>,
    pub index: &'a RelIndex,
}

/// `bias[i·len + j] = c2p(i, j) + p2c(i, j)` of one sequence and head. `qkv` holds per token
/// `[q | k | v]` (q already divided by the scale in v1, k not yet in v2).
///
/// Query `i` only reaches table rows `idx(i-(len-1)) ..= idx(i)`, a band of the full
/// `len × (2·len-1)` product, so the GEMM runs per block of queries (keys for p2c) over that
/// block's window of rows (about half the work for long sequences). Every element of a GEMM
/// is computed the same way whatever the shapes, so the blocking changes no bit.
pub(super) fn seq_head_bias(
    k: &Kernels,
    p: &BiasParams,
    tables: &RelTables,
    qkv: &[f32],
    span: SeqSpan,
    head: usize,
) -> Vec<f32> {
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
        if let Some(s) = p.divide_terms_by {
            buf.iter_mut().for_each(|v| *v /= s);
        }
        n
    };
    let idx = |d: isize| p.index.get(d);
    // rel[d + last] = idx(d) for d in -last..=last
    let rel = p.index.around(len);
    let mut bias = vec![0.0f32; len * len];
    // c2p: a block of queries i0..i1 reaches rows idx(i0 - last) ..= idx(i1 - 1)
    if let Some(table) = tables.pos_key.as_deref() {
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
    if let Some(table) = tables.pos_query.as_deref() {
        let add = tables.pos_key.is_some();
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
    bias
}

/// The biases of a run of sequences, one `len × len` matrix per (sequence, head).
pub(super) struct DisentangledBias {
    pub k: &'static Kernels,
    pub heads: usize,
    pub lens: Vec<usize>,
    pub bias: Vec<Vec<f32>>,
}

impl DisentangledBias {
    pub(super) fn compute(
        k: &'static Kernels,
        p: &BiasParams,
        tables: &RelTables,
        qkv: &[f32],
        spans: &[SeqSpan],
    ) -> Self {
        let tasks: Vec<(usize, usize)> = (0..spans.len())
            .flat_map(|s| (0..p.heads).map(move |h| (s, h)))
            .collect();
        let bias = tasks
            .par_iter()
            .map(|&(s, h)| seq_head_bias(k, p, tables, qkv, spans[s], h))
            .collect();
        DisentangledBias {
            k,
            heads: p.heads,
            lens: spans.iter().map(|s| s.len).collect(),
            bias,
        }
    }
}

impl AttentionBias for DisentangledBias {
    fn add_row(&self, seq: usize, head: usize, i: usize, scores: &mut [f32]) {
        let len = self.lens[seq];
        let b = &self.bias[seq * self.heads + head][i * len..(i + 1) * len];
        self.k.add(scores, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_is_accurate() {
        for &x in &[1.0f64, 2.0, 0.5, 3.9921875, 1.0e-3, 7.0, 123456.0, 1.000001] {
            let want = x.ln();
            assert!(
                (ln_f64(x) - want).abs() <= 4e-16 * want.abs().max(1.0),
                "{x}"
            );
        }
    }

    #[test]
    fn log_buckets_match_transformers() {
        // torch: make_log_bucket_position(arange(-600, 601), 256, 512) at a few points
        assert_eq!(log_bucket(0, 256, 512), 0);
        assert_eq!(log_bucket(-128, 256, 512), -128);
        assert_eq!(log_bucket(129, 256, 512), 129);
        assert_eq!(log_bucket(511, 256, 512), 255);
        assert_eq!(log_bucket(-511, 256, 512), -255);
        // buckets 8, max 32 (the deberta_v2_tiny fixture): 5 -> 5, 6 -> 6, 31 -> 7
        assert_eq!(log_bucket(4, 8, 32), 4);
        assert_eq!(log_bucket(31, 8, 32), 7);
    }
}
