//! model.safetensors → f32 tensors, validated against what `hparams` implies.
//!
//! F32 / F16 / BF16 tensors are widened to f32; a quantized tensor `W` (listed in
//! `quantization.tensors`) is read from `W.__q` (U8 codes), `W.__scale` and `W.__zero` (F32)
//! and dequantized once, here, as `scale * (u - zero)` in f32 ([`Store::get`]), or, for the
//! weight matrices the models multiply as they are, kept as codes: [`Store::blocks`] rewrites
//! them as integer affine blocks (`kin_infer_core::kernels::affine`) that the GEMM
//! dequantizes with the same formula, so the products keep their bits and the weights stay
//! 2-8 bits in memory. Every tensor the model asks for
//! is marked consumed; [`Store::finish`] rejects whatever was not (except the I64
//! `num_batches_tracked` bookkeeping of BatchNorm).

use crate::error::{Error, Result};
use crate::meta::{Granularity, IntLayout};
use kin_infer_core::kernels::affine::AffineBlocks;
use kin_infer_core::kernels::WeightFormat;
use safetensors::{Dtype, SafeTensors};
use std::cell::RefCell;
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// Reads the `bits`-bit code number `c` of a row packed LSB-first, little-endian.
#[inline]
pub fn read_code(row: &[u8], bits: u32, c: usize) -> u32 {
    let pos = c * bits as usize;
    let byte = pos / 8;
    let shift = (pos % 8) as u32;
    let lo = row[byte] as u32;
    let hi = row.get(byte + 1).copied().unwrap_or(0) as u32;
    ((lo | (hi << 8)) >> shift) & ((1u32 << bits) - 1)
}

/// Packs codes (each < 2^bits) of one row LSB-first, little-endian (the writer's side, used
/// by tests and the random-artifact builder).
pub fn pack_codes(codes: &[u32], bits: u32) -> Vec<u8> {
    let mut out = vec![0u8; (codes.len() * bits as usize).div_ceil(8)];
    for (c, &u) in codes.iter().enumerate() {
        for b in 0..bits as usize {
            if (u >> b) & 1 == 1 {
                let pos = c * bits as usize + b;
                out[pos / 8] |= 1 << (pos % 8);
            }
        }
    }
    out
}

/// `w[r][c] = scale[r][g] * (u[r][c] - zero[r][g])`, `g = group_of(c)`, in f32.
pub fn dequantize(
    q: &[u8],
    scale: &[f32],
    zero: &[f32],
    rows: usize,
    cols: usize,
    layout: &IntLayout,
) -> Vec<f32> {
    let bpr = layout.bytes_per_row(cols);
    let ng = layout.n_groups(cols);
    let mut out = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &q[r * bpr..(r + 1) * bpr];
        for c in 0..cols {
            let g = r * ng + layout.group_of(c);
            let u = read_code(row, layout.bits, c) as f32;
            out.push(scale[g] * (u - zero[g]));
        }
    }
    out
}

struct Raw<'a> {
    dtype: Dtype,
    shape: Vec<usize>,
    data: &'a [u8],
}

/// A quantized tensor's parts, validated ([`Store::codes`]).
struct Codes<'a> {
    q: &'a [u8],
    scale: Vec<f32>,
    zero: Vec<f32>,
    layout: IntLayout,
}

/// The tensors of one model.safetensors, borrowed from its map while the model is built.
pub struct Store<'a> {
    path: PathBuf,
    tensors: BTreeMap<String, Raw<'a>>,
    quant: Option<IntLayout>,
    quantized: HashSet<String>,
    consumed: RefCell<HashSet<String>>,
    /// Whether [`Store::blocks`] keeps quantized weights as codes (else they are dequantized
    /// at load, the reference path the codes are tested against).
    keep_codes: bool,
    /// Matrices kept as codes, and their resident bytes (panels).
    kept: std::cell::Cell<(usize, usize)>,
}

fn is_bookkeeping(name: &str) -> bool {
    name == "num_batches_tracked" || name.ends_with(".num_batches_tracked")
}

impl<'a> Store<'a> {
    /// Parses the header (the `safetensors` crate validates offsets and lengths) and checks
    /// every dtype.
    pub fn parse(
        path: &Path,
        bytes: &'a [u8],
        quant: Option<IntLayout>,
        quantized: &[String],
    ) -> Result<Store<'a>> {
        let st = SafeTensors::deserialize(bytes).map_err(|e| Error::Safetensors {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        let mut tensors = BTreeMap::new();
        for (name, view) in st.tensors() {
            let dtype = view.dtype();
            let ok = match dtype {
                Dtype::F32 | Dtype::F16 | Dtype::BF16 => true,
                Dtype::U8 => name.ends_with(".__q"),
                Dtype::I64 => is_bookkeeping(&name),
                _ => false,
            };
            if !ok {
                return Err(Error::tensor(
                    path,
                    &name,
                    format!(
                        "dtype {dtype:?} is not allowed (float tensors F32/F16/BF16, U8 only for `.__q` codes, I64 only for num_batches_tracked)"
                    ),
                ));
            }
            tensors.insert(
                name,
                Raw {
                    dtype,
                    shape: view.shape().to_vec(),
                    data: view.data(),
                },
            );
        }
        Ok(Store {
            path: path.to_path_buf(),
            tensors,
            quant,
            quantized: quantized.iter().cloned().collect(),
            consumed: RefCell::new(HashSet::new()),
            keep_codes: true,
            kept: std::cell::Cell::new((0, 0)),
        })
    }

    /// Dequantizes every quantized weight at load instead of keeping codes (same outputs,
    /// bit for bit: tests compare the two; more memory).
    pub fn dequantize_at_load(mut self) -> Self {
        self.keep_codes = false;
        self
    }

    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }

    fn raw(&self, name: &str) -> Result<&Raw<'a>> {
        let r = self
            .tensors
            .get(name)
            .ok_or_else(|| Error::tensor(&self.path, name, "missing"))?;
        self.consumed.borrow_mut().insert(name.to_string());
        Ok(r)
    }

    fn float(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let r = self.raw(name)?;
        if r.shape != shape {
            return Err(Error::tensor(
                &self.path,
                name,
                format!("shape {:?}, but hparams imply {shape:?}", r.shape),
            ));
        }
        let d = r.data;
        Ok(match r.dtype {
            Dtype::F32 => d
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::F16 => d
                .chunks_exact(2)
                .map(|b| half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect(),
            Dtype::BF16 => d
                .chunks_exact(2)
                .map(|b| half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32())
                .collect(),
            other => {
                return Err(Error::tensor(
                    &self.path,
                    name,
                    format!("dtype {other:?} where a float tensor is expected"),
                ))
            }
        })
    }

    /// `f` over a float tensor of exactly `shape`, as [`Store::get`] reads it, but an F32
    /// tensor that is 4-byte aligned in the map is lent in place, not copied (most of an edge
    /// model's load is moving its weights; this saves one pass and its page faults).
    pub fn with<R>(&self, name: &str, shape: &[usize], f: impl FnOnce(&[f32]) -> R) -> Result<R> {
        if !self.quantized.contains(name) {
            if let Some(r) = self.tensors.get(name) {
                if r.dtype == Dtype::F32 && r.shape == shape && cfg!(target_endian = "little") {
                    // SAFETY: the bytes are the map's (alive for 'a), any bit pattern is an
                    // f32, and the cast is taken only when aligned with no bytes left over.
                    let (pre, floats, post) = unsafe { r.data.align_to::<f32>() };
                    if pre.is_empty() && post.is_empty() {
                        self.consumed.borrow_mut().insert(name.to_string());
                        return Ok(f(floats));
                    }
                }
            }
        }
        Ok(f(&self.get(name, shape)?))
    }

    /// A float tensor of exactly `shape` (dequantized if the artifact quantized it).
    pub fn get(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        if !self.quantized.contains(name) {
            return self.float(name, shape);
        }
        let rows = if shape.len() >= 2 { shape[0] } else { 1 };
        let cols: usize = shape.iter().product::<usize>() / rows.max(1);
        let c = self.codes(name, rows, cols)?;
        Ok(dequantize(c.q, &c.scale, &c.zero, rows, cols, &c.layout))
    }

    /// The validated codes (`W.__q`, U8 `[rows, bytes per row]`), scales and zeros
    /// (`[rows, groups]`) of the quantized tensor `name` read as `rows × cols`.
    fn codes(&self, name: &str, rows: usize, cols: usize) -> Result<Codes<'a>> {
        let layout = self
            .quant
            .expect("quantized tensors imply an integer layout");
        let qn = format!("{name}.__q");
        let q = self.raw(&qn)?;
        let bpr = layout.bytes_per_row(cols);
        if q.dtype != Dtype::U8 || q.shape != [rows, bpr] {
            return Err(Error::tensor(
                &self.path,
                &qn,
                format!(
                    "{:?} {:?}, but {}-bit codes of a [{rows}, {cols}] weight need U8 [{rows}, {bpr}]",
                    q.dtype, q.shape, layout.bits
                ),
            ));
        }
        let ng = layout.n_groups(cols);
        Ok(Codes {
            q: q.data,
            scale: self.float(&format!("{name}.__scale"), &[rows, ng])?,
            zero: self.float(&format!("{name}.__zero"), &[rows, ng])?,
            layout,
        })
    }

    /// A quantized weight of `shape` (`[out, in...]`) as integer affine blocks, one row of
    /// blocks per output, with their format, or `None` when the tensor is not quantized or
    /// its groups do not cut the rows into blocks (the caller then reads it with
    /// [`Store::get`]). The codes, scales and zeros are validated as [`Store::get`] does.
    pub fn blocks(&self, name: &str, shape: &[usize]) -> Result<Option<(WeightFormat, Vec<u8>)>> {
        if !self.keep_codes || !self.quantized.contains(name) || shape.len() < 2 {
            return Ok(None);
        }
        let layout = self
            .quant
            .expect("quantized tensors imply an integer layout");
        let rows = shape[0];
        let cols: usize = shape[1..].iter().product();
        let group = match layout.granularity {
            Granularity::PerGroup => layout.group_size,
            _ => cols,
        };
        let Some(fmt) = AffineBlocks::for_rows(layout.bits, cols, group) else {
            return Ok(None);
        };
        let parts = self.codes(name, rows, cols)?;
        let (bpr, ng) = (layout.bytes_per_row(cols), layout.n_groups(cols));
        let mut out = Vec::with_capacity(rows * cols / fmt.block_len() * fmt.block_bytes());
        for r in 0..rows {
            let row = &parts.q[r * bpr..(r + 1) * bpr];
            fmt.encode_row(
                cols,
                group,
                |c| read_code(row, layout.bits, c),
                |g| parts.scale[r * ng + g],
                |g| parts.zero[r * ng + g],
                &mut out,
            );
        }
        Ok(Some((WeightFormat::Affine(fmt), out)))
    }

    /// Records a matrix the backend kept as codes (`bytes` resident).
    pub fn note_kept(&self, bytes: usize) {
        let (n, b) = self.kept.get();
        self.kept.set((n + 1, b + bytes));
    }

    /// Matrices kept as codes so far, and their resident bytes.
    pub fn kept(&self) -> (usize, usize) {
        self.kept.get()
    }

    /// Marks a tensor that must be present with `shape` but is not used.
    pub fn require_unused(&self, name: &str, shape: &[usize]) -> Result<()> {
        self.get(name, shape).map(|_| ())
    }

    /// Fails on the first tensor nothing consumed (I64 `num_batches_tracked` excepted).
    pub fn finish(&self) -> Result<()> {
        let used = self.consumed.borrow();
        for (name, r) in &self.tensors {
            if used.contains(name) || (r.dtype == Dtype::I64 && is_bookkeeping(name)) {
                continue;
            }
            return Err(Error::tensor(
                &self.path,
                name,
                "extra: not consumed by the declared architecture",
            ));
        }
        if let Some(n) = self
            .quantized
            .iter()
            .find(|n| !used.contains(&format!("{n}.__q")))
        {
            return Err(Error::tensor(
                &self.path,
                n,
                "listed in quantization.tensors but not a weight of the declared architecture",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The naive reader: bit i of the row stream is bit (i % 8) of byte i / 8.
    fn naive(row: &[u8], bits: u32, c: usize) -> u32 {
        (0..bits as usize)
            .map(|b| {
                let i = c * bits as usize + b;
                (((row[i / 8] >> (i % 8)) & 1) as u32) << b
            })
            .sum()
    }

    #[test]
    fn every_width_round_trips_and_matches_the_naive_reader() {
        let mut s = 0x9e3779b97f4a7c15u64;
        for bits in 2..=8u32 {
            for cols in [1usize, 3, 7, 8, 13, 33, 64, 100] {
                let codes: Vec<u32> = (0..cols)
                    .map(|_| {
                        s ^= s << 13;
                        s ^= s >> 7;
                        s ^= s << 17;
                        (s as u32) & ((1 << bits) - 1)
                    })
                    .collect();
                let row = pack_codes(&codes, bits);
                assert_eq!(row.len(), (cols * bits as usize).div_ceil(8));
                for (c, &u) in codes.iter().enumerate() {
                    assert_eq!(read_code(&row, bits, c), u, "bits {bits} col {c}");
                    assert_eq!(naive(&row, bits, c), u, "bits {bits} col {c}");
                }
            }
        }
    }

    #[test]
    fn dequantize_per_group_uses_the_group_of_each_column() {
        use crate::meta::Granularity;
        let layout = IntLayout {
            bits: 3,
            granularity: Granularity::PerGroup,
            group_size: 2,
        };
        let codes = [1u32, 2, 3, 4, 5];
        let q = pack_codes(&codes, 3);
        let scale = [1.0, 0.5, 2.0];
        let zero = [0.0, 1.0, 4.0];
        let w = dequantize(&q, &scale, &zero, 1, 5, &layout);
        assert_eq!(w, vec![1.0, 2.0, 1.0, 1.5, 2.0]);
    }
}
