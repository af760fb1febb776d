//! The packed right-hand matrix of the GEMM ([`PackedMatrix`]): its panels in the weight's
//! storage, element and column reads (widened or dequantized exactly), and repacking for a
//! tier of another panel width.

use super::{blocks, gemm, panels, q8_gemm, WeightFormat};

/// A right-hand matrix B (k × n) packed once for [`Kernels::matmul`]: panels of `nr` columns
/// (zero-padded), each k-major (`nr` values per p), 64-byte aligned. `nr` is the packing tier's
/// micro-kernel width; a matrix packed by another tier is repacked on use (same bits, slower).
/// The panels keep the weight's storage ([`WeightFormat`]): a bf16/f16 matrix takes half the
/// memory and bandwidth, and gives the same bits as the f32 packing of its widened values.
#[derive(Clone, Debug)]
pub struct PackedMatrix {
    pub(super) k: usize,
    pub(super) n: usize,
    pub(super) nr: usize,
    pub(super) buf: panels::Panels,
}

impl PackedMatrix {
    /// A 0 × 0 matrix: scratch for [`Kernels::pack_rows_into`] / [`Kernels::pack_cols_into`].
    pub fn empty() -> PackedMatrix {
        PackedMatrix {
            k: 0,
            n: 0,
            nr: 1,
            buf: panels::Panels::f32(gemm::AlignedBuf::zeroed(0)),
        }
    }
    pub fn k(&self) -> usize {
        self.k
    }
    pub fn n(&self) -> usize {
        self.n
    }
    /// Panel width of the packing (the packing tier's micro-kernel width).
    pub fn panel_width(&self) -> usize {
        self.nr
    }
    /// Storage type of the panels.
    pub fn format(&self) -> WeightFormat {
        self.buf.format
    }
    fn index(&self, p: usize, j: usize) -> usize {
        assert!(p < self.k && j < self.n, "PackedMatrix::get out of range");
        (j / self.nr) * self.k * self.nr + p * self.nr + j % self.nr
    }
    /// Element B[p][j] (widened to f32 for half-precision panels, dequantized for blocks).
    pub fn get(&self, p: usize, j: usize) -> f32 {
        if let Some(w) = self.q8_rows() {
            assert!(p < self.k && j < self.n, "PackedMatrix::get out of range");
            let f = w.t.traits();
            let mut block = [0.0f32; super::ggml::QK_K];
            (f.dequantize)(&w.block(j, p / f.block_len), &mut block[..f.block_len]);
            return block[p % f.block_len];
        }
        let i = self.index(p, j);
        match &self.buf.data {
            panels::PanelData::F32(v) => v.as_slice()[i],
            panels::PanelData::U16(v) => self.buf.format.widen(v.as_slice()[i]),
            panels::PanelData::Blocks(v) => {
                blocks::get(self.block_type(), self.nr, v.as_slice(), self.k, p, j)
            }
            panels::PanelData::Rows(..) => unreachable!("q8 rows are read above"),
        }
    }

    /// The weight rows of a matrix packed for the q8 numerics mode
    /// ([`super::Kernels::pack_weights_q8`]); `None` for panels.
    pub(super) fn q8_rows(&self) -> Option<q8_gemm::Rows<'_>> {
        match (&self.buf.data, self.buf.format.quant()) {
            (panels::PanelData::Rows(v, lanes), Some(t)) => Some(q8_gemm::Rows {
                t,
                bytes: v.as_slice(),
                row_bytes: self.k / t.block_len() * t.block_bytes(),
                n: self.n,
                lanes: *lanes,
            }),
            _ => None,
        }
    }

    /// Whether products over this matrix run in the q8 numerics mode (activations quantized
    /// to 8 bits; see `q8_gemm.rs`).
    pub fn is_q8(&self) -> bool {
        self.q8_rows().is_some()
    }
    /// Column `j` of B (all `k` values: row `j` of the torch weight it was packed from, e.g.
    /// one token's embedding of a tied or quantized table) into `out`, widened or dequantized
    /// exactly: the values the products use.
    ///
    /// # Panics
    /// If `j >= n` or `out` is shorter than `k`.
    pub fn column_into(&self, j: usize, out: &mut [f32]) {
        assert!(
            j < self.n && out.len() >= self.k,
            "column_into out of range"
        );
        let (k, nr) = (self.k, self.nr);
        let base = (j / nr) * k * nr + j % nr;
        match &self.buf.data {
            panels::PanelData::F32(v) => {
                for (p, o) in out[..k].iter_mut().enumerate() {
                    *o = v.as_slice()[base + p * nr];
                }
            }
            panels::PanelData::U16(v) => {
                for (p, o) in out[..k].iter_mut().enumerate() {
                    *o = self.buf.format.widen(v.as_slice()[base + p * nr]);
                }
            }
            panels::PanelData::Blocks(v) => {
                blocks::column_into(self.block_type(), nr, v.as_slice(), k, j, out)
            }
            panels::PanelData::Rows(..) => {
                let w = self.q8_rows().expect("q8 rows");
                let f = w.t.traits();
                for (b, o) in out[..k].chunks_exact_mut(f.block_len).enumerate() {
                    (f.dequantize)(&w.block(j, b), o);
                }
            }
        }
    }
    /// The block format of block panels (they are only ever built with one).
    fn block_type(&self) -> WeightFormat {
        debug_assert!(self.buf.format.is_block());
        self.buf.format
    }
    /// Bytes the panels occupy (what a loaded matrix keeps resident).
    pub fn stored_bytes(&self) -> usize {
        match &self.buf.data {
            panels::PanelData::F32(v) => v.as_slice().len() * 4,
            panels::PanelData::U16(v) => v.as_slice().len() * 2,
            panels::PanelData::Blocks(v) | panels::PanelData::Rows(v, _) => v.as_slice().len(),
        }
    }
    /// Raw stored bits of B[p][j] for half-precision panels.
    fn get_bits(&self, p: usize, j: usize) -> u16 {
        let i = self.index(p, j);
        match &self.buf.data {
            panels::PanelData::U16(v) => v.as_slice()[i],
            _ => unreachable!("get_bits on panels that are not 16-bit"),
        }
    }
    /// The same matrix packed with panel width `nr`, keeping the storage type.
    pub(super) fn repack(&self, nr: usize) -> PackedMatrix {
        let (k, n) = (self.k, self.n);
        let data = match &self.buf.data {
            // Rows are the same for every tier.
            panels::PanelData::Rows(..) => return self.clone(),
            panels::PanelData::F32(_) => {
                panels::PanelData::F32(panels::pack_panels(nr, k, n, |p, j| self.get(p, j)))
            }
            panels::PanelData::U16(_) => {
                panels::PanelData::U16(panels::pack_panels(nr, k, n, |p, j| self.get_bits(p, j)))
            }
            panels::PanelData::Blocks(v) => panels::PanelData::Blocks(blocks::repack(
                self.block_type(),
                self.nr,
                v.as_slice(),
                k,
                n,
                nr,
            )),
        };
        let buf = panels::Panels {
            format: self.buf.format,
            data,
        };
        PackedMatrix { k, n, nr, buf }
    }
}

pub(super) fn half_packed(
    nr: usize,
    k: usize,
    n: usize,
    panels: gemm::AlignedBuf<u16>,
    fmt: WeightFormat,
) -> PackedMatrix {
    assert!(fmt.is_half(), "half_packed with {}", fmt.name());
    let buf = panels::Panels {
        format: fmt,
        data: panels::PanelData::U16(panels),
    };
    PackedMatrix { k, n, nr, buf }
}
