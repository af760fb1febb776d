//! Weight rows as stored, the one input of [`Kernels::pack_weights`] and of the backend
//! seam's `prepare_weights`: whatever a container holds (f32, raw bf16/f16 bits, ggml or
//! affine blocks) reaches the packer in its own storage, so one entry point serves every
//! format and the format decides the panels.

use super::aligned::AlignedBuf;
use super::packed::half_packed;
use super::{blocks, panels, q8_gemm, Kernels, PackedMatrix, WeightFormat};
use crate::error::{InferError, Result};
use std::borrow::Cow;

/// Consecutive rows of a weight matrix (torch `Linear` layout, each row `k` values) in their
/// stored format, borrowed.
#[derive(Clone, Copy, Debug)]
pub enum StoredRows<'a> {
    /// f32 values.
    F32(&'a [f32]),
    /// The 16-bit patterns of a half format (BF16, F16), widened exactly inside the GEMM.
    Half(WeightFormat, &'a [u16]),
    /// Whole blocks of a block format (ggml's or affine), a row's blocks contiguous, kept
    /// quantized and dequantized inside the GEMM.
    Blocks(WeightFormat, &'a [u8]),
}

impl<'a> StoredRows<'a> {
    /// The storage format.
    pub fn format(&self) -> WeightFormat {
        match *self {
            StoredRows::F32(_) => WeightFormat::F32,
            StoredRows::Half(f, _) | StoredRows::Blocks(f, _) => f,
        }
    }

    /// The values widened (or dequantized by the reference) to f32: the values every
    /// product over the stored rows multiplies by.
    pub fn to_f32(&self) -> Cow<'a, [f32]> {
        match *self {
            StoredRows::F32(v) => Cow::Borrowed(v),
            StoredRows::Half(f, bits) => bits.iter().map(|b| f.widen(*b)).collect(),
            StoredRows::Blocks(f, bytes) => {
                let mut out = vec![0.0; bytes.len() / f.block_bytes() * f.block_len()];
                f.dequantize(bytes, &mut out);
                Cow::Owned(out)
            }
        }
    }
}

/// The rows (`unit` elements each) of `parts`, every part one `pick` accepts.
///
/// # Errors
/// A part of another storage (a run must be one format), or a part not whole rows.
fn rows<'a, T>(
    parts: &[StoredRows<'a>],
    unit: usize,
    fmt: WeightFormat,
    pick: fn(StoredRows<'a>) -> Option<&'a [T]>,
) -> Result<Vec<&'a [T]>> {
    let mut rows = Vec::new();
    for p in parts {
        let Some(v) = pick(*p).filter(|_| p.format() == fmt) else {
            return Err(InferError::Unsupported(format!(
                "one weight matrix packed from parts of {} and {}",
                fmt.name(),
                p.format().name()
            )));
        };
        if unit == 0 || !v.len().is_multiple_of(unit) {
            return Err(InferError::Unsupported(format!(
                "a {} weight part of {} elements is not whole rows of {unit}",
                fmt.name(),
                v.len()
            )));
        }
        rows.extend(v.chunks_exact(unit));
    }
    Ok(rows)
}

impl Kernels {
    /// Packs weights sharing the input width `k`, all of one format, as one matrix whose
    /// output columns are the parts' rows in order (one GEMM then computes, e.g., q, k and v
    /// together, each element exactly as it would alone) so that `matmul` computes `a · wᵀ`.
    /// The panels keep the format's storage: f32; 16-bit patterns the micro-kernel widens
    /// (exactly); or blocks (`blocks.rs`) dequantized inside the GEMM. Either way `matmul`
    /// returns the bits of the f32 product over the widened (dequantized) weight.
    ///
    /// # Errors
    /// Parts of more than one format, a part not whole rows of `k` values, or block rows
    /// that are not whole blocks.
    pub fn pack_weights(&self, parts: &[StoredRows], k: usize) -> Result<PackedMatrix> {
        let fmt = parts.first().map_or(WeightFormat::F32, StoredRows::format);
        let nr = self.ops.nr;
        if fmt.is_half() {
            let rows = rows(parts, k, fmt, |p| match p {
                StoredRows::Half(_, v) => Some(v),
                _ => None,
            })?;
            let buf = panels::pack_col_slices(nr, k, rows.len(), |j| rows[j]);
            return Ok(half_packed(nr, k, rows.len(), buf, fmt));
        }
        if !fmt.is_block() {
            let rows = rows(parts, k, fmt, |p| match p {
                StoredRows::F32(v) => Some(v),
                _ => None,
            })?;
            return Ok(self.f32_panels(k, rows.len(), |j| rows[j]));
        }
        let (bl, bb) = (fmt.block_len(), fmt.block_bytes());
        if k == 0 || !k.is_multiple_of(bl) {
            return Err(InferError::Unsupported(format!(
                "a {} weight matrix with rows of {k} values (block-quantized rows must be whole blocks of {bl})",
                fmt.name(),
            )));
        }
        let rows = rows(parts, k / bl * bb, fmt, |p| match p {
            StoredRows::Blocks(_, v) => Some(v),
            _ => None,
        })?;
        let n = rows.len();
        let buf = panels::Panels {
            format: fmt,
            data: panels::PanelData::Blocks(blocks::pack(fmt, nr, k, n, |j| rows[j])),
        };
        Ok(PackedMatrix { k, n, nr, buf })
    }

    /// Packs ggml-quantized weights for the q8 numerics mode: the parts' blocks as stored,
    /// rows interleaved in groups of eight (`q8_gemm::Rows`; no panels, no f32 copy), multiplied by [`Kernels::matmul`] with 8-bit activations
    /// (`q8_gemm.rs`). The format must have a q8 pairing (its row of the format table).
    ///
    /// # Errors
    /// A format without a q8 pairing, parts of more than one format, or rows that are not
    /// whole blocks of `k` values.
    pub fn pack_weights_q8(&self, parts: &[StoredRows], k: usize) -> Result<PackedMatrix> {
        let fmt = parts.first().map_or(WeightFormat::F32, StoredRows::format);
        let t = fmt
            .quant()
            .filter(|t| t.traits().q8.is_some())
            .ok_or_else(|| {
                InferError::Unsupported(format!(
                    "q8 activations over {} weights (they pair with ggml's quantized types only)",
                    fmt.name()
                ))
            })?;
        let row_bytes = t.row_bytes(k).filter(|_| k > 0).ok_or_else(|| {
            InferError::Unsupported(format!(
                "a {} weight matrix with rows of {k} values (block-quantized rows must be whole blocks of {})",
                t.name(),
                t.block_len()
            ))
        })?;
        let rows = rows(parts, row_bytes, fmt, |p| match p {
            StoredRows::Blocks(_, v) => Some(v),
            _ => None,
        })?;
        // The lane layout where this tier's kernel reads it (its groups padded to whole).
        let lanes = self.ops.q8_lanes && super::q8_lanes::covers(t);
        let stored = q8_gemm::stored_rows(rows.len(), lanes);
        let mut buf = AlignedBuf::zeroed(stored * row_bytes);
        q8_gemm::interleave(t, &rows, row_bytes, lanes, buf.as_mut_slice());
        let buf = panels::Panels {
            format: fmt,
            data: panels::PanelData::Rows(buf, lanes),
        };
        Ok(PackedMatrix {
            k,
            n: rows.len(),
            nr: 1,
            buf,
        })
    }
}
