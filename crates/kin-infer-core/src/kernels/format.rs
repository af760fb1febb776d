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
//! Adding a format (Q8_0, Q4_0 next): a variant here with its geometry and reference; its
//! packing in `kernels/mod.rs`; one micro-kernel per tier in that tier's table (generic.rs,
//! x86_sse.rs, x86_avx2.rs, x86_avx512.rs, neon.rs: how the tier loads a panel row of it as
//! f32 lanes); the container's dtype mapped to it (`io/safetensors.rs`, later GGUF).

use super::gemm;
use super::ggml::GgmlType;

/// Storage of a weight matrix's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WeightFormat {
    /// IEEE binary32.
    F32,
    /// bfloat16: the top 16 bits of an f32 (widening is exact).
    Bf16,
    /// IEEE binary16 (widening is exact).
    F16,
}

impl WeightFormat {
    /// Every format, in [`WeightFormat::index`] order.
    pub const ALL: [WeightFormat; 3] = [WeightFormat::F32, WeightFormat::Bf16, WeightFormat::F16];
    /// Number of formats (the length of a tier's per-format kernel table).
    pub const COUNT: usize = Self::ALL.len();

    /// Position in [`WeightFormat::ALL`] and in every tier's per-format kernel table.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name containers and reports use (safetensors' dtype spelling).
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "F32",
            WeightFormat::Bf16 => "BF16",
            WeightFormat::F16 => "F16",
        }
    }

    /// Values per block (1 for the element formats; 32 for ggml's Q8_0 / Q4_0).
    pub const fn block_len(self) -> usize {
        1
    }

    /// Bytes per block as stored.
    pub const fn block_bytes(self) -> usize {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::Bf16 | WeightFormat::F16 => 2,
        }
    }

    /// Whether values are stored as 16-bit patterns (the half-precision panels).
    pub const fn is_half(self) -> bool {
        matches!(self, WeightFormat::Bf16 | WeightFormat::F16)
    }

    /// The exact f32 value of one stored 16-bit pattern of a half format.
    ///
    /// # Panics
    /// On a format that is not 16-bit.
    pub fn widen(self, bits: u16) -> f32 {
        match self {
            WeightFormat::Bf16 => gemm::bf16_to_f32(bits),
            WeightFormat::F16 => gemm::f16_to_f32(bits),
            WeightFormat::F32 => panic!("widen: F32 is not a 16-bit format"),
        }
    }

    /// The scalar reference dequantizer: `bytes` (whole blocks, little-endian as stored)
    /// into `out` (`block_len` values per block).
    ///
    /// # Panics
    /// If `bytes` is not whole blocks or `out` does not hold their values.
    pub fn dequantize(self, bytes: &[u8], out: &mut [f32]) {
        self.ggml_type().dequantize(bytes, out)
    }

    /// The ggml tensor type with this storage (whose reference dequantizer is this one's).
    pub const fn ggml_type(self) -> GgmlType {
        match self {
            WeightFormat::F32 => GgmlType::F32,
            WeightFormat::Bf16 => GgmlType::BF16,
            WeightFormat::F16 => GgmlType::F16,
        }
    }
}

/// One entry per [`WeightFormat`], indexed by [`WeightFormat::index`]: a tier's kernels.
pub(crate) type PerFormat<T> = [T; WeightFormat::COUNT];
