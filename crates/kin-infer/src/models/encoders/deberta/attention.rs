//! DeBERTa's disentangled attention terms, the model's side: relative-position indices
//! (clamped, or v2's log buckets) and each layer's position projections of the relative
//! embedding table. The backend computes the terms from them
//! ([`GpuCompute::disentangled_bias`](crate::backend::GpuCompute::disentangled_bias), whose
//! [`DisentangledTerms`] documents the formulas) into a bias that
//! [`GpuCompute::attention`](crate::backend::GpuCompute::attention) adds
//! ([`AttnBias::Dense`](crate::backend::AttnBias::Dense)).
//!
//! For query `i` and key `j` of one sequence, with `r = idx(i - j)` a row of the relative
//! embedding table (depending only on `i - j`, never on the batch):
//!
//! ```text
//! c2p(i, j) = q_i · pos_key[r]        p2c(i, j) = k_j · pos_query[r]
//! ```
//!
//! The additions follow transformers: `bias = c2p + p2c` (each divided by
//! `sqrt(d · scale_factor)` first in v2; in v1 `q` and `pos_query` are divided before the
//! products), then `scores + bias`.

use crate::backend::{DisentangledTerms, Tensor};

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

    /// The terms of one layer of `heads` × `head_dim` with `tables`; v2 divides each term by
    /// `divide_by`.
    pub(super) fn terms<'a>(
        &'a self,
        tables: &'a RelTables,
        (heads, head_dim): (usize, usize),
        divide_by: Option<f32>,
    ) -> DisentangledTerms<'a> {
        DisentangledTerms {
            heads,
            head_dim,
            pos_key: tables.pos_key.as_ref(),
            pos_query: tables.pos_query.as_ref(),
            index: &self.idx,
            max_len: self.max_len,
            divide_by,
        }
    }
}

/// One layer's position projections of the relative embedding table, `[2·span, hidden]`.
pub(super) struct RelTables {
    /// For c2p: `pos_proj(rel)` (v1), `pos_key_proj(rel)` or `key_proj(rel)` (v2).
    pub pos_key: Option<Tensor>,
    /// For p2c: `pos_q_proj(rel) / scale` (v1), `pos_query_proj(rel)` or `query_proj(rel)` (v2).
    pub pos_query: Option<Tensor>,
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
