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

use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::OnceLock;

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

/// Positions per lazily built block of a [`RopeTable`].
pub const TABLE_BLOCK: usize = 512;

/// `cos`/`sin` rows for positions `0..positions` of one set of frequencies, built on first
/// use, [`TABLE_BLOCK`] positions at a time. Entry `(p, i)` is `cos(p·inv[i])` (times
/// `factor` when set), from the deterministic `f64` routines rounded once to `f32`: the same
/// bits whether the block is built at load, during a prefill or by another thread.
#[derive(Clone, Debug)]
pub struct RopeTable {
    inv: Vec<f32>,
    factor: Option<f32>,
    positions: usize,
    /// Block `b`: `[rows, half]` cos then `[rows, half]` sin, `rows = min(TABLE_BLOCK,
    /// positions - b·TABLE_BLOCK)`.
    blocks: Vec<OnceLock<Box<[f32]>>>,
}

impl RopeTable {
    /// A table over `positions` positions; nothing is computed yet.
    pub fn new(inv: Vec<f32>, positions: usize, factor: Option<f32>) -> Self {
        let n = positions.div_ceil(TABLE_BLOCK);
        RopeTable {
            inv,
            factor,
            positions,
            blocks: (0..n).map(|_| OnceLock::new()).collect(),
        }
    }

    pub fn positions(&self) -> usize {
        self.positions
    }

    /// Builds block `b` (serially: it may run inside a parallel region, and nothing in it may
    /// wait on the thread pool while the block's lock is held).
    fn block(&self, b: usize) -> &[f32] {
        self.blocks[b].get_or_init(|| {
            let half = self.inv.len();
            let first = b * TABLE_BLOCK;
            let rows = TABLE_BLOCK.min(self.positions - first);
            let mut t = vec![0.0f32; 2 * rows * half].into_boxed_slice();
            let (cos, sin) = t.split_at_mut(rows * half);
            for (r, (c, s)) in cos.chunks_mut(half).zip(sin.chunks_mut(half)).enumerate() {
                fill_row(&self.inv, first + r, self.factor, c, s);
            }
            t
        })
    }

    /// Builds, in parallel, every block positions `start..end` touch (so a prefill does not
    /// build them one by one inside its attention loop).
    pub fn ensure(&self, start: usize, end: usize) {
        let end = end.min(self.positions);
        if start >= end {
            return;
        }
        let (b0, b1) = (start / TABLE_BLOCK, (end - 1) / TABLE_BLOCK + 1);
        if (b0..b1).all(|b| self.blocks[b].get().is_some()) {
            return;
        }
        (b0..b1).into_par_iter().for_each(|b| {
            self.block(b);
        });
    }

    /// `(cos, sin)` rows of position `pos` (`dim / 2` each); panics past `positions`.
    #[inline]
    pub fn row(&self, pos: usize) -> (&[f32], &[f32]) {
        assert!(
            pos < self.positions,
            "rotary position {pos} past the table ({})",
            self.positions
        );
        let half = self.inv.len();
        let (b, r) = (pos / TABLE_BLOCK, pos % TABLE_BLOCK);
        let t = self.block(b);
        let rows = t.len() / (2 * half).max(1);
        (
            &t[r * half..(r + 1) * half],
            &t[(rows + r) * half..(rows + r + 1) * half],
        )
    }
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

/// One position's `cos`/`sin` row: angles `pos · inv[i]` in f32 (PyTorch's product), cos/sin
/// from the deterministic f64 routines rounded to f32, then times `factor` in f32.
fn fill_row(inv: &[f32], pos: usize, factor: Option<f32>, cos: &mut [f32], sin: &mut [f32]) {
    for (i, &f) in inv.iter().enumerate() {
        let angle = (pos as f32) * f;
        let (sv, cv) = sin_cos_f64(angle as f64);
        let (cv, sv) = (cv as f32, sv as f32);
        (cos[i], sin[i]) = match factor {
            Some(a) => (cv * a, sv * a),
            None => (cv, sv),
        };
    }
}

/// Fills `cos`/`sin` rows (`half` each) for positions `first..` with the frequencies `inv`.
fn fill_tables(inv: &[f32], first: usize, cos: &mut [f32], sin: &mut [f32]) {
    let half = inv.len();
    cos.par_chunks_mut(half)
        .zip(sin.par_chunks_mut(half))
        .enumerate()
        .for_each(|(r, (c, s))| fill_row(inv, first + r, None, c, s));
}

/// Rotates the first `dim` features of `x` by the rows `c`, `s` (`dim / 2` each).
#[inline]
fn rotate(x: &mut [f32], c: &[f32], s: &[f32], dim: usize, interleaved: bool) {
    let half = dim / 2;
    if interleaved {
        for i in 0..half {
            let (x1, x2) = (x[2 * i], x[2 * i + 1]);
            x[2 * i] = x1 * c[i] - x2 * s[i];
            x[2 * i + 1] = x2 * c[i] + x1 * s[i];
        }
    } else {
        let (a, b) = x[..dim].split_at_mut(half);
        for i in 0..half {
            let (x1, x2) = (a[i], b[i]);
            a[i] = x1 * c[i] - x2 * s[i];
            b[i] = x2 * c[i] + x1 * s[i];
        }
    }
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
                RotaryChunk {
                    dim: self.dim,
                    interleaved: self.interleaved,
                    start,
                    rows: Rows::Owned {
                        cos: Cow::Owned(cos),
                        sin: Cow::Owned(sin),
                    },
                }
            }
            _ => {
                assert!(
                    end <= self.max_positions,
                    "rotary chunk {start}..{end} past the table ({})",
                    self.max_positions
                );
                self.table.ensure(start, end);
                RotaryChunk {
                    dim: self.dim,
                    interleaved: self.interleaved,
                    start,
                    rows: Rows::Table(&self.table),
                }
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
        RotaryChunk {
            dim: self.dim,
            interleaved: false,
            start,
            rows: Rows::Table(table),
        }
    }
}

/// The `cos`/`sin` rows of one chunk (see [`Rotary::chunk`]).
#[derive(Clone, Debug)]
pub struct RotaryChunk<'a> {
    dim: usize,
    interleaved: bool,
    start: usize,
    rows: Rows<'a>,
}

/// Where a chunk's rows come from: the model's table, or frequencies computed for this chunk.
#[derive(Clone, Debug)]
enum Rows<'a> {
    Table(&'a RopeTable),
    Owned {
        /// `[rows, dim / 2]`
        cos: Cow<'a, [f32]>,
        /// `[rows, dim / 2]`
        sin: Cow<'a, [f32]>,
    },
}

impl RotaryChunk<'_> {
    /// Rotated features per head.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Pairs `(2i, 2i + 1)` (GPT-J) rather than halves (GPT-NeoX).
    pub fn interleaved(&self) -> bool {
        self.interleaved
    }

    /// Rotates one head vector `x` (`>= dim` features) at the absolute position `pos`
    /// (`start <= pos < start + rows`).
    #[inline]
    pub fn apply(&self, x: &mut [f32], pos: usize) {
        let (c, s) = self.cos_sin(pos);
        rotate(x, c, s, self.dim, self.interleaved);
    }

    /// The cosines and sines (`dim / 2` each) at `pos` (a GPU backend uploads them).
    pub fn cos_sin(&self, pos: usize) -> (&[f32], &[f32]) {
        let half = self.dim / 2;
        match &self.rows {
            Rows::Table(t) => t.row(pos),
            Rows::Owned { cos, sin } => {
                let r = pos - self.start;
                (
                    &cos[r * half..(r + 1) * half],
                    &sin[r * half..(r + 1) * half],
                )
            }
        }
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

// ------------------------------------------------------------------------------------------
// Deterministic f64 elementary functions for building tables (RoPE frequencies and angles,
// ALiBi slopes). Plain IEEE f64 arithmetic in a fixed order: identical bits everywhere.
// Accuracy ~1e-16 relative, far below the f32 rounding applied to every result.
// ------------------------------------------------------------------------------------------

const LN2_HI: f64 = 0.693_147_180_369_123_8;
const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;

/// `2^k` for an integer `k` in the normal range.
fn exp2i(k: i64) -> f64 {
    debug_assert!((-1022..=1023).contains(&k));
    f64::from_bits(((k + 1023) as u64) << 52)
}

/// Natural logarithm of a positive, finite `x`.
pub fn ln_f64(x: f64) -> f64 {
    assert!(x > 0.0 && x.is_finite(), "ln of {x}");
    // x = m · 2^k with m in [sqrt(1/2), sqrt(2)).
    let bits = x.to_bits();
    let mut k = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & ((1u64 << 52) - 1)) | (1023u64 << 52));
    if m > std::f64::consts::SQRT_2 {
        m *= 0.5;
        k += 1;
    }
    // ln m = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172: 2 (s + s^3/3 + ... + s^31/31).
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut acc = 0.0;
    let mut n = 31;
    while n >= 3 {
        acc = (acc + 1.0 / n as f64) * s2;
        n -= 2;
    }
    let lnm = 2.0 * (s + s * acc);
    (k as f64) * LN2_HI + ((k as f64) * LN2_LO + lnm)
}

/// `e^x` for `|x| < 700`.
pub fn exp_f64(x: f64) -> f64 {
    assert!(x.abs() < 700.0, "exp of {x}");
    let k = (x / std::f64::consts::LN_2).round();
    let r = (x - k * LN2_HI) - k * LN2_LO; // |r| <= 0.347
                                           // Taylor series to r^24 / 24!, Horner from the top.
    let mut acc = 1.0;
    let mut n = 24;
    while n >= 1 {
        acc = 1.0 + acc * r / n as f64;
        n -= 1;
    }
    acc * exp2i(k as i64)
}

/// `base^e` for `base > 0`; exact for an integer power of two raised to an integer.
pub fn pow_f64(base: f64, e: f64) -> f64 {
    if e == 0.0 {
        return 1.0;
    }
    exp_f64(e * ln_f64(base))
}

/// `2^e`: exact when `e` is an integer, else `2^floor(e) · e^(frac · ln 2)`.
pub fn exp2_f64(e: f64) -> f64 {
    let k = e.floor();
    let f = e - k;
    let p = if f == 0.0 {
        1.0
    } else {
        exp_f64(f * std::f64::consts::LN_2)
    };
    p * exp2i(k as i64)
}

/// `(sin x, cos x)` for `|x| < 2^30`.
pub fn sin_cos_f64(x: f64) -> (f64, f64) {
    assert!(x.abs() < (1u64 << 30) as f64, "sin/cos of {x}");
    // Cody-Waite reduction by pi/2 in three 33-bit pieces (fdlibm's constants): with |k| < 2^30
    // each product k·PIO2_n is exact.
    const PIO2_1: f64 = 1.570_796_326_734_125_6;
    const PIO2_2: f64 = 6.077_100_506_303_966e-11;
    const PIO2_3: f64 = 2.022_266_248_711_166_5e-21;
    const PIO2_3T: f64 = 8.478_427_660_368_9e-32;
    let k = (x * std::f64::consts::FRAC_2_PI).round();
    let r = ((x - k * PIO2_1) - k * PIO2_2) - k * PIO2_3 - k * PIO2_3T;
    let r2 = r * r;
    // |r| <= pi/4: Taylor series to r^23 (sin) and r^22 (cos).
    let mut s = 0.0;
    let mut c = 0.0;
    let mut n = 11;
    while n >= 1 {
        // sin: terms (-1)^n r^(2n+1)/(2n+1)!;  cos: (-1)^n r^(2n)/(2n)!
        s = 1.0 - s * r2 / ((2 * n) as f64 * (2 * n + 1) as f64);
        c = 1.0 - c * r2 / ((2 * n - 1) as f64 * (2 * n) as f64);
        n -= 1;
    }
    let sin_r = r * s;
    let cos_r = c;
    match (k as i64).rem_euclid(4) {
        0 => (sin_r, cos_r),
        1 => (cos_r, -sin_r),
        2 => (-sin_r, -cos_r),
        _ => (-cos_r, sin_r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f64_functions_match_std_closely() {
        for &x in &[1e-3, 0.5, 1.0, 2.0, 10.0, 1000.0, 10000.0, 123456.789] {
            let l = ln_f64(x);
            assert!(
                (l - x.ln()).abs() <= 4e-16 * x.ln().abs().max(1.0),
                "ln {x}"
            );
        }
        for &x in &[-20.0, -1.0, -1e-3, 0.0, 0.3, 1.0, 5.5, 40.0] {
            let e = exp_f64(x);
            assert!(((e - x.exp()) / x.exp()).abs() < 1e-15, "exp {x}");
        }
        for i in 0..2000 {
            let x = (i as f64) * 4.1 - 1000.0;
            let (s, c) = sin_cos_f64(x);
            assert!(
                (s - x.sin()).abs() < 1e-15 && (c - x.cos()).abs() < 1e-15,
                "sincos {x}"
            );
        }
        assert_eq!(exp2_f64(-2.0), 0.25);
        assert_eq!(exp2_f64(-8.0 / 4.0 * 3.0), 0.015625);
        assert!((pow_f64(10000.0, 0.25) - 10.0).abs() < 1e-14);
    }

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

    /// The lazily built table holds exactly the rows an eager fill computes, whichever block is
    /// built first and whether through `ensure` (parallel) or `row` (on demand), up to a last
    /// partial block.
    #[test]
    fn lazy_table_equals_the_eager_fill_bit_for_bit() {
        let inv = inv_freq(24, 10000.0);
        let n = 2 * TABLE_BLOCK + 37;
        let (mut cos, mut sin) = (vec![0.0f32; n * 12], vec![0.0f32; n * 12]);
        fill_tables(&inv, 0, &mut cos, &mut sin);
        let on_demand = RopeTable::new(inv.clone(), n, None);
        let ensured = RopeTable::new(inv.clone(), n, None);
        ensured.ensure(TABLE_BLOCK - 1, n);
        for p in (0..n).rev() {
            let want = (&cos[p * 12..(p + 1) * 12], &sin[p * 12..(p + 1) * 12]);
            assert_eq!(on_demand.row(p), want, "position {p}");
            assert_eq!(ensured.row(p), want, "position {p}");
        }
        // A declared 2^24 positions cost only the block index until used.
        let big = RopeTable::new(inv, 1 << 24, None);
        assert!(big.blocks.iter().all(|b| b.get().is_none()));
        assert_eq!(big.row((1 << 24) - 1).0.len(), 12);
        assert_eq!(big.blocks.iter().filter(|b| b.get().is_some()).count(), 1);
    }
}
