//! Rotary position embeddings (RoPE), written once for every family that uses them.
//!
//! A [`Rotary`] holds `cos`/`sin` tables for positions `0..max_positions`, built lazily in
//! blocks of [`TABLE_BLOCK`] positions the first time a position in the block is used (a model
//! declaring `max_position_embeddings` 2^24 costs nothing until it runs that far; each entry
//! is the same bits whenever it is computed): frequencies `inv_freq[i] = 1 / base^(2i / dim)` and angles `pos · inv_freq[i]` are computed in
//! `f32` exactly as PyTorch computes them (`position_ids.float() * inv_freq`); `cos`/`sin` of
//! those angles come from the deterministic `f64` routines below (our own argument reduction and
//! series, plain IEEE arithmetic), rounded once to `f32`. No platform libm is involved, so the
//! tables, and everything built on them, are the same bits on every OS, CPU and SIMD tier.
//!
//! Two layouts of the rotated pairs:
//! - non-interleaved (GPT-NeoX / Llama `rotate_half`): feature `i` pairs with `i + dim/2`;
//! - interleaved (GPT-J): feature `2i` pairs with `2i + 1`.
//!
//! Partial rotary (`rotary_emb_fraction`, `partial_rotary_factor`): only the first `dim`
//! features of each head rotate; the rest pass through.
//!
//! The rotation is `out1 = x1·cos − x2·sin`, `out2 = x2·cos + x1·sin`, two products and one
//! add/sub each (the order PyTorch's `q * cos + rotate_half(q) * sin` rounds in), scalar code
//! shared by every tier.

// The table and the chunk the backend's `rope` op takes live below the backend (op_args), the
// deterministic f64 routines beside them; re-exported here, where the models look for them.
pub use crate::op_args::f64_math::{exp2_f64, exp_f64, ln_f64, pow_f64, sin_cos_f64};
use crate::op_args::rotary::{fill_tables, rotate};
pub use crate::op_args::rotary::{RopeTable, RotaryChunk, TABLE_BLOCK};
use rayon::prelude::*;

/// A rope scaling type (`rope_scaling` on the Hub, `rope_parameters.rope_type` in transformers
/// 5.x), computed as transformers 5.24 computes it (`modeling_rope_utils`). Factors are kept as the
/// config's `f64` and rounded to `f32` where PyTorch applies them to a `float32` tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE (`default`).
    None,
    /// `linear`: `inv_freq / factor` (positions divided by `factor`).
    Linear { factor: f64 },
    /// `llama3`: per frequency, by wavelength `2π / inv_freq` against the bands
    /// `original_max_positions / high_freq_factor` and `original_max_positions / low_freq_factor`:
    /// short wavelengths unchanged, long ones divided by `factor`, the middle band interpolated.
    Llama3 {
        factor: f64,
        low_freq_factor: f64,
        high_freq_factor: f64,
        original_max_positions: usize,
    },
    /// `dynamic` (NTK-aware): a chunk whose sequence ends at length `L > max_positions` (the table
    /// length, `max_position_embeddings`) uses the base rescaled for `L`:
    /// `base · (factor · L / max_positions − (factor − 1))^(dim / (dim − 2))`; shorter ones use the
    /// plain table. As in transformers' `dynamic_rope_update`, cached keys keep the rotation of the
    /// chunk that produced them.
    Dynamic { factor: f64 },
}

/// Rotary tables for one head geometry.
#[derive(Clone, Debug)]
pub struct Rotary {
    /// Rotated features per head (even, `<= head_dim`).
    dim: usize,
    interleaved: bool,
    /// `[max_positions, dim / 2]`, built lazily.
    table: RopeTable,
    max_positions: usize,
    base: f64,
    scaling: RopeScaling,
}

impl Rotary {
    /// Tables for `dim` rotated features (even), frequency base `base`, positions
    /// `0..max_positions`.
    pub fn new(dim: usize, base: f64, interleaved: bool, max_positions: usize) -> Self {
        Self::with_scaling(dim, base, interleaved, max_positions, RopeScaling::None)
    }

    /// [`Rotary::new`] with a scaling type. For [`RopeScaling::Dynamic`] the table holds the
    /// plain frequencies for `0..max_positions`; chunks reaching beyond it are computed per chunk
    /// by [`Rotary::chunk`] (any length).
    pub fn with_scaling(
        dim: usize,
        base: f64,
        interleaved: bool,
        max_positions: usize,
        scaling: RopeScaling,
    ) -> Self {
        assert!(
            dim.is_multiple_of(2) && dim > 0,
            "rotary dim must be even and positive"
        );
        let inv = match scaling {
            RopeScaling::None | RopeScaling::Dynamic { .. } => inv_freq(dim, base),
            RopeScaling::Linear { factor } => linear_inv_freq(dim, base, factor),
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_positions,
            } => llama3_inv_freq(
                dim,
                base,
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_positions,
            ),
        };
        Rotary {
            dim,
            interleaved,
            table: RopeTable::new(inv, max_positions, None),
            max_positions,
            base,
            scaling,
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn interleaved(&self) -> bool {
        self.interleaved
    }

    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    pub fn scaling(&self) -> RopeScaling {
        self.scaling
    }

    /// `(cos, sin)` rows of position `pos` (`dim / 2` each).
    pub fn row(&self, pos: usize) -> (&[f32], &[f32]) {
        self.table.row(pos)
    }

    /// Rotates one head vector `x` (`>= dim` features; only the first `dim` change) at `pos`
    /// (from the table: `pos < max_positions`).
    #[inline]
    pub fn apply(&self, x: &mut [f32], pos: usize) {
        let (c, s) = self.row(pos);
        rotate(x, c, s, self.dim, self.interleaved);
    }

    /// The rotation of the chunk at positions `start..start + rows` of a sequence (the prompt,
    /// or one decoded token). The table's rows, except for [`RopeScaling::Dynamic`] when the
    /// chunk ends past `max_positions`: then the frequencies of the sequence length
    /// `start + rows`, computed here. Every other type needs `start + rows <= max_positions`.
    pub fn chunk(&self, start: usize, rows: usize) -> RotaryChunk<'_> {
        let end = start + rows;
        let half = self.dim / 2;
        match self.scaling {
            RopeScaling::Dynamic { factor } if end > self.max_positions => {
                let inv = dynamic_inv_freq(self.dim, self.base, factor, self.max_positions, end);
                let mut cos = vec![0.0f32; rows * half];
                let mut sin = vec![0.0f32; rows * half];
                fill_tables(&inv, start, &mut cos, &mut sin);
                RotaryChunk::owned(self.dim, self.interleaved, start, cos, sin)
            }
            _ => {
                assert!(
                    end <= self.max_positions,
                    "rotary chunk {start}..{end} past the table ({})",
                    self.max_positions
                );
                self.table.ensure(start, end);
                RotaryChunk::from_table(self.dim, self.interleaved, start, &self.table)
            }
        }
    }

    /// Rotates q and k in a packed fused-QKV buffer: row `r` (stride `3 * heads * head_dim`,
    /// layout `[q | k | v]`, heads contiguous) is at position `positions[r]`.
    pub fn apply_qkv(&self, qkv: &mut [f32], positions: &[u32], heads: usize, head_dim: usize) {
        let inner = heads * head_dim;
        let end = positions.iter().map(|&p| p as usize + 1).max().unwrap_or(0);
        self.table.ensure(0, end);
        qkv.par_chunks_mut(3 * inner)
            .zip(positions.par_iter())
            .for_each(|(row, &p)| {
                for h in 0..2 * heads {
                    self.apply(&mut row[h * head_dim..(h + 1) * head_dim], p as usize);
                }
            });
    }
}

/// Rotary tables chosen by the capacity of the cache they serve (Phi-3's longrope: `short`
/// for caches up to `switch` positions, `long` past it), rotating the first `dim` features of
/// each head in GPT-NeoX halves.
pub struct SwitchedRotary {
    dim: usize,
    /// Caches with more positions than this use `long`; `usize::MAX` without one.
    switch: usize,
    short: RopeTable,
    long: Option<RopeTable>,
}

impl SwitchedRotary {
    /// `long`: the switch capacity and its table.
    pub fn new(dim: usize, short: RopeTable, long: Option<(usize, RopeTable)>) -> Self {
        let (switch, long) = match long {
            Some((s, t)) => (s, Some(t)),
            None => (usize::MAX, None),
        };
        SwitchedRotary {
            dim,
            switch,
            short,
            long,
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The rotation of positions `start..start + rows` in a cache of `capacity` positions.
    pub fn chunk(&self, capacity: usize, start: usize, rows: usize) -> RotaryChunk<'_> {
        let table = match &self.long {
            Some(long) if capacity > self.switch => long,
            _ => &self.short,
        };
        table.ensure(start, start + rows);
        RotaryChunk::from_table(self.dim, false, start, table)
    }
}

/// `linear` scaling: `inv_freq / factor`, an `f32` division (PyTorch's `inv_freq /= factor`).
pub fn linear_inv_freq(dim: usize, base: f64, factor: f64) -> Vec<f32> {
    let f = factor as f32;
    inv_freq(dim, base).into_iter().map(|v| v / f).collect()
}

/// `llama3` scaling, transformers 5.24 `_compute_llama3_parameters` in `float32` with PyTorch's
/// rounding: `scalar / tensor` is `reciprocal(tensor) · scalar`, `tensor / scalar` an `f32`
/// division, Python scalars rounded to `f32`.
pub fn llama3_inv_freq(
    dim: usize,
    base: f64,
    factor: f64,
    low_freq_factor: f64,
    high_freq_factor: f64,
    original_max_positions: usize,
) -> Vec<f32> {
    let old = original_max_positions as f64;
    let low_wavelen = (old / low_freq_factor) as f32;
    let high_wavelen = (old / high_freq_factor) as f32;
    let f = factor as f32;
    let two_pi = (2.0 * std::f64::consts::PI) as f32;
    let (low, band) = (
        low_freq_factor as f32,
        (high_freq_factor - low_freq_factor) as f32,
    );
    inv_freq(dim, base)
        .into_iter()
        .map(|v| {
            let wavelen = (1.0f32 / v) * two_pi;
            let scaled = if wavelen > low_wavelen { v / f } else { v };
            // `~(wavelen < high) * ~(wavelen > low)`; wavelengths are finite.
            let medium = wavelen >= high_wavelen && wavelen <= low_wavelen;
            if medium {
                let smooth = ((1.0f32 / wavelen) * old as f32 - low) / band;
                (1.0 - smooth) * scaled / f + smooth * scaled
            } else {
                scaled
            }
        })
        .collect()
}

/// `dynamic` (NTK) frequencies for a sequence of length `seq_len`: transformers 5.24
/// `_compute_dynamic_ntk_parameters` as `dynamic_rope_update` calls it (a tensor `seq_len`, so
/// `float32` arithmetic): `L = max(seq_len, max_positions)`,
/// `base' = base · (factor · L / max_positions − (factor − 1))^(dim / (dim − 2))`, then
/// [`inv_freq`] of `base'`. Needs `dim > 2`.
pub fn dynamic_inv_freq(
    dim: usize,
    base: f64,
    factor: f64,
    max_positions: usize,
    seq_len: usize,
) -> Vec<f32> {
    assert!(dim > 2, "dynamic rope needs a rotary dim above 2");
    let l = seq_len.max(max_positions) as f32;
    let f = factor as f32;
    let a = f * l / max_positions as f32 - (factor - 1.0) as f32;
    let e = (dim as f64 / (dim - 2) as f64) as f32;
    let p = pow_f64(a as f64, e as f64) as f32;
    let scaled = (base as f32) * p;
    inv_freq(dim, scaled as f64)
}

/// `inv_freq[i] = 1 / base^(2i / dim)` in `f32`, as PyTorch computes it: the exponent is an `f32`
/// division, the power is evaluated (here in `f64`, deterministically) and rounded to `f32`, the
/// reciprocal is an `f32` division.
pub fn inv_freq(dim: usize, base: f64) -> Vec<f32> {
    (0..dim / 2)
        .map(|i| {
            let e = (2 * i) as f32 / dim as f32;
            let p = pow_f64(base, e as f64) as f32;
            1.0f32 / p
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotation_matches_the_formula() {
        let r = Rotary::new(4, 10000.0, false, 8);
        let mut x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0];
        r.apply(&mut x, 3);
        let inv = inv_freq(4, 10000.0);
        let a0 = 3.0f64 * inv[0] as f64;
        let a1 = 3.0f64 * inv[1] as f64;
        let want = [
            1.0 * a0.cos() - 3.0 * a0.sin(),
            2.0 * a1.cos() - 4.0 * a1.sin(),
            3.0 * a0.cos() + 1.0 * a0.sin(),
            4.0 * a1.cos() + 2.0 * a1.sin(),
        ];
        for i in 0..4 {
            assert!(
                (x[i] as f64 - want[i]).abs() < 1e-5,
                "{i}: {} vs {}",
                x[i],
                want[i]
            );
        }
        assert_eq!(&x[4..], &[5.0, 6.0]);

        let ri = Rotary::new(4, 10000.0, true, 8);
        let mut y = [1.0f32, 2.0, 3.0, 4.0];
        ri.apply(&mut y, 3);
        let want = [
            1.0 * a0.cos() - 2.0 * a0.sin(),
            2.0 * a0.cos() + 1.0 * a0.sin(),
            3.0 * a1.cos() - 4.0 * a1.sin(),
            4.0 * a1.cos() + 3.0 * a1.sin(),
        ];
        for i in 0..4 {
            assert!((y[i] as f64 - want[i]).abs() < 1e-5, "interleaved {i}");
        }
        // position 0 is the identity
        let mut z = [1.0f32, 2.0, 3.0, 4.0];
        r.apply(&mut z, 0);
        assert_eq!(z, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn scaled_frequencies() {
        let plain = inv_freq(16, 10000.0);
        // dynamic up to the table length is the plain table, bit for bit
        assert_eq!(dynamic_inv_freq(16, 10000.0, 2.0, 16, 16), plain);
        assert_eq!(dynamic_inv_freq(16, 10000.0, 2.0, 16, 3), plain);
        let d = dynamic_inv_freq(16, 10000.0, 2.0, 16, 24);
        assert_eq!(d[0], 1.0);
        assert!(d[1..].iter().zip(&plain[1..]).all(|(a, b)| a < b));
        // linear divides every frequency
        let l = linear_inv_freq(16, 10000.0, 2.0);
        assert!(l.iter().zip(&plain).all(|(a, b)| *a == b / 2.0));
        // llama3 (bands 16 and 64 for original 64, low/high 1/4): wavelengths 2π·10000^(i/8):
        // i = 0 kept, i = 1, 2 interpolated, i >= 3 divided by the factor.
        let q = llama3_inv_freq(16, 10000.0, 8.0, 1.0, 4.0, 64);
        assert_eq!(q[0], plain[0]);
        for i in 1..3 {
            assert!(q[i] < plain[i] && q[i] > plain[i] / 8.0, "{i}");
        }
        for i in 3..8 {
            assert_eq!(q[i], plain[i] / 8.0, "{i}");
        }
        // table vs chunk: the same rows
        let r = Rotary::with_scaling(16, 10000.0, false, 16, RopeScaling::Dynamic { factor: 2.0 });
        let plain_r = Rotary::new(16, 10000.0, false, 16);
        assert!((0..16).all(|p| r.row(p) == plain_r.row(p)));
        let c = r.chunk(3, 5);
        let (mut x, mut y) = ([0.5f32; 16], [0.5f32; 16]);
        c.apply(&mut x, 6);
        plain_r.apply(&mut y, 6);
        assert_eq!(x, y);
        let far = r.chunk(20, 4);
        let mut z = [0.5f32; 16];
        far.apply(&mut z, 21);
        assert_ne!(z, [0.5f32; 16]);
    }
}
