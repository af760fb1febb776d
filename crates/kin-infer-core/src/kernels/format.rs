//! Weight formats as data: the one description of how a stored weight's values are laid out,
//! read by the loader (a container's dtype maps to one), the packer (panels keep the format's
//! storage) and the GEMM driver (which picks each tier's micro-kernel for it from the tier's
//! table, indexed by [`WeightFormat::index`]).
//!
//! A format is a block of `block_len` values stored in `block_bytes` bytes, and a scalar
//! reference dequantizer ([`WeightFormat::dequantize`]) that every tier's micro-kernel must
//! match bit for bit (tests/half_kernels.rs checks each tier against it through the f32 GEMM:
//! the product over a stored weight equals the product over its dequantized f32 twin).
//!
//! Two kinds of format: *element* formats (F32, BF16, F16: one value per stored element),
//! each with one micro-kernel per tier in that tier's table (generic.rs, x86_sse.rs,
//! x86_avx2.rs, x86_avx512.rs, neon.rs: how the tier loads a panel row of it as f32 lanes);
//! and ggml's *block* formats ([`WeightFormat::Quant`]: Q8_0, Q4_0, Q4_1, Q5_0, …, K-quants),
//! whose panels (`blocks.rs`) the GEMM driver dequantizes into f32 panel rows for the f32
//! micro-kernel, or, for a single row (decode), hands to a tier's direct kernel that
//! dequantizes in registers (`Ops::row4_quant`); and integer *affine* blocks
//! ([`WeightFormat::Affine`], quantized inMotion artifacts), staged like the ggml blocks that
//! have no direct kernel. Either way the values are the reference
//! dequantizer's, so the products are the f32 product's bits over the dequantized matrix.

use super::affine::AffineBlocks;
// The table itself is ggml.rs's, beside the id it is indexed by; re-exported where formats are.
use super::ggml::GgmlType;
pub use super::ggml::{DequantizeBlock, FormatTraits, Layout, QuantizeBlock, FORMATS};
use super::widen;

/// Storage of a weight matrix's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// IEEE binary32.
    F32,
    /// bfloat16: the top 16 bits of an f32 (widening is exact).
    Bf16,
    /// IEEE binary16 (widening is exact).
    F16,
    /// A ggml block type (never F32/F16/BF16: those are the element formats above; build
    /// with [`WeightFormat::from_ggml`]).
    Quant(GgmlType),
    /// Integer affine blocks (quantized inMotion artifacts, `affine.rs`).
    Affine(AffineBlocks),
}

impl WeightFormat {
    /// Every element format, in [`WeightFormat::index`] order.
    pub const ALL: [WeightFormat; 3] = [WeightFormat::F32, WeightFormat::Bf16, WeightFormat::F16];
    /// Number of element formats (the length of a tier's per-format kernel table).
    pub const COUNT: usize = Self::ALL.len();

    /// The format of a ggml tensor type: F32/F16/BF16 are element formats, the rest blocks.
    pub const fn from_ggml(t: GgmlType) -> WeightFormat {
        match t {
            GgmlType::F32 => WeightFormat::F32,
            GgmlType::F16 => WeightFormat::F16,
            GgmlType::BF16 => WeightFormat::Bf16,
            q => WeightFormat::Quant(q),
        }
    }

    /// Position of an element format in [`WeightFormat::ALL`] and in every tier's
    /// per-format kernel table.
    ///
    /// # Panics
    /// On a block format (the driver never indexes the element tables with one).
    pub const fn index(self) -> usize {
        match self {
            WeightFormat::F32 => 0,
            WeightFormat::Bf16 => 1,
            WeightFormat::F16 => 2,
            WeightFormat::Quant(_) | WeightFormat::Affine(_) => {
                panic!("block formats have no element kernel")
            }
        }
    }

    /// The ggml type of a ggml block format, `None` for any other format.
    pub const fn quant(self) -> Option<GgmlType> {
        match self {
            WeightFormat::Quant(t) => Some(t),
            _ => None,
        }
    }

    /// Whether the format is stored in blocks (ggml's or affine): its panels are
    /// `blocks.rs`'s, dequantized inside the GEMM.
    pub const fn is_block(self) -> bool {
        matches!(self, WeightFormat::Quant(_) | WeightFormat::Affine(_))
    }

    /// The format's row of [`FORMATS`]; affine blocks (inMotion's own, not a ggml type)
    /// have none and answer from [`AffineBlocks`].
    pub const fn traits(self) -> Option<&'static FormatTraits> {
        match self {
            WeightFormat::F32 => Some(GgmlType::F32.traits()),
            WeightFormat::Bf16 => Some(GgmlType::BF16.traits()),
            WeightFormat::F16 => Some(GgmlType::F16.traits()),
            WeightFormat::Quant(t) => Some(t.traits()),
            WeightFormat::Affine(_) => None,
        }
    }

    /// [`WeightFormat::traits`] of a format known to have a row (callers match affine first).
    const fn row(self) -> &'static FormatTraits {
        match self.traits() {
            Some(f) => f,
            None => panic!("affine blocks have no format row"),
        }
    }

    /// The name containers and reports use (safetensors' dtype spelling; ggml's for blocks).
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Affine(a) => a.name(),
            _ => self.row().name,
        }
    }

    /// Values per block (1 for the element formats; 32 for Q8_0 / Q4_0, 256 for K-quants).
    pub const fn block_len(self) -> usize {
        match self {
            WeightFormat::Affine(a) => a.block_len(),
            _ => self.row().block_len,
        }
    }

    /// Bytes per block as stored.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightFormat::Affine(a) => a.block_bytes(),
            _ => self.row().block_bytes,
        }
    }

    /// Bytes one block takes in the GEMM's panels ([`FormatTraits::panel_block_bytes`]).
    pub const fn panel_block_bytes(self) -> usize {
        match self.traits() {
            Some(f) => f.panel_block_bytes,
            None => self.block_bytes(),
        }
    }

    /// Bytes of `elems` values in the GEMM's panels (`elems` a multiple of the block length).
    pub const fn bytes_of(self, elems: usize) -> usize {
        elems / self.block_len() * self.panel_block_bytes()
    }

    /// Bytes of a stored row of `n` values: `None` when `n` is not whole blocks or the size
    /// overflows.
    pub fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(self.block_len()) {
            return None;
        }
        (n / self.block_len()).checked_mul(self.block_bytes())
    }

    /// Whether values are stored as 16-bit patterns (the half-precision panels).
    pub const fn is_half(self) -> bool {
        matches!(self.traits(), Some(f) if matches!(f.layout, Layout::Half))
    }

    /// The code the GPU kernels switch on for a weight of this format kept as stored
    /// (`None`: widened to f32 at load).
    pub const fn gpu_code(self) -> Option<u32> {
        match self.traits() {
            Some(f) => f.gpu,
            None => None,
        }
    }

    /// The exact f32 value of one stored 16-bit pattern of a half format.
    ///
    /// # Panics
    /// On a format that is not 16-bit.
    pub fn widen(self, bits: u16) -> f32 {
        match self {
            WeightFormat::Bf16 => widen::bf16_to_f32(bits),
            WeightFormat::F16 => widen::f16_to_f32(bits),
            WeightFormat::F32 | WeightFormat::Quant(_) | WeightFormat::Affine(_) => {
                panic!("widen: {} is not a 16-bit format", self.name())
            }
        }
    }

    /// The scalar reference dequantizer: `bytes` (whole blocks, little-endian as stored)
    /// into `out` (`block_len` values per block).
    ///
    /// # Panics
    /// If `bytes` is not whole blocks or `out` does not hold their values.
    pub fn dequantize(self, bytes: &[u8], out: &mut [f32]) {
        match self {
            WeightFormat::Affine(a) => a.dequantize(bytes, out),
            _ => self.row().ty.dequantize(bytes, out),
        }
    }
}

/// One entry per element [`WeightFormat`], indexed by [`WeightFormat::index`]: a tier's kernels.
pub(crate) type PerFormat<T> = [T; WeightFormat::COUNT];
