//! The rotary rows the backend's `rope` op applies: a lazily built [`RopeTable`] of
//! `cos`/`sin` per position and the [`RotaryChunk`] of one forward pass. Below the backend (it
//! takes them as arguments); how a model builds its frequencies is `nn::rope`. Entries come
//! from the deterministic f64 routines of [`f64_math`](super::f64_math), rounded once to f32.

use super::f64_math::sin_cos_f64;
use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::OnceLock;

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
pub(crate) fn fill_tables(inv: &[f32], first: usize, cos: &mut [f32], sin: &mut [f32]) {
    let half = inv.len();
    cos.par_chunks_mut(half)
        .zip(sin.par_chunks_mut(half))
        .enumerate()
        .for_each(|(r, (c, s))| fill_row(inv, first + r, None, c, s));
}

/// Rotates the first `dim` features of `x` by the rows `c`, `s` (`dim / 2` each).
#[inline]
pub(crate) fn rotate(x: &mut [f32], c: &[f32], s: &[f32], dim: usize, interleaved: bool) {
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

impl<'a> RotaryChunk<'a> {
    /// The rows of `table` for positions `start..` (the table's blocks already built).
    pub fn from_table(dim: usize, interleaved: bool, start: usize, table: &'a RopeTable) -> Self {
        RotaryChunk {
            dim,
            interleaved,
            start,
            rows: Rows::Table(table),
        }
    }

    /// Rows computed for this chunk only (`[rows, dim / 2]` each), for positions `start..`.
    pub fn owned(
        dim: usize,
        interleaved: bool,
        start: usize,
        cos: Vec<f32>,
        sin: Vec<f32>,
    ) -> Self {
        RotaryChunk {
            dim,
            interleaved,
            start,
            rows: Rows::Owned {
                cos: Cow::Owned(cos),
                sin: Cow::Owned(sin),
            },
        }
    }

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::rope::inv_freq;

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
