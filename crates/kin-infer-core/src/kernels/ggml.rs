//! ggml's tensor types (the codes GGUF files carry) and the format table indexed by them, as
//! ggml's `type_traits`: [`GgmlType`] is only an id, and every property of a type (code, name,
//! block geometry, storage layout, GPU code, reference dequantizer and quantizer) is a column
//! of its row in [`FORMATS`]. Adding a format is a row here plus its kernels. The reference
//! dequantizers are `dequant.rs` (bit for bit `gguf.quants`), the quantizers `quantize.rs` and
//! `quantize_k.rs`; [`quantize`] runs a row's quantizer over whole blocks.
//!
//! A GGUF reader maps a type code to a [`GgmlType`] (an unknown or unsupported code, e.g. the
//! IQ* codebooks, becomes a typed error naming the tensor and the type: [`type_name`] spells
//! every code ggml defines) and sizes a tensor with [`GgmlType::row_bytes`], which checks the
//! row is whole blocks and does not overflow.

use super::q8_act::ActBlocks;
use super::q8_dot::{self, DecodeInt};
use super::{dequant, quantize as quantize_ref, quantize_k};

/// The ggml tensor types this engine reads: only an id. Everything about a type (code,
/// name, geometry, reference dequantizer and quantizer, GPU code) is its row of
/// [`FORMATS`], which this enum indexes (the discriminant is the row).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum GgmlType {
    F32,
    F16,
    BF16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    IQ4_NL,
}

pub use super::dequant::QK_K;

/// Every ggml type code and its name (ggml.h's `enum ggml_type`), for messages about codes
/// this engine does not read.
const NAMES: &[(u32, &str)] = &[
    (0, "F32"),
    (1, "F16"),
    (2, "Q4_0"),
    (3, "Q4_1"),
    (6, "Q5_0"),
    (7, "Q5_1"),
    (8, "Q8_0"),
    (9, "Q8_1"),
    (10, "Q2_K"),
    (11, "Q3_K"),
    (12, "Q4_K"),
    (13, "Q5_K"),
    (14, "Q6_K"),
    (15, "Q8_K"),
    (16, "IQ2_XXS"),
    (17, "IQ2_XS"),
    (18, "IQ3_XXS"),
    (19, "IQ1_S"),
    (20, "IQ4_NL"),
    (21, "IQ3_S"),
    (22, "IQ2_S"),
    (23, "IQ4_XS"),
    (24, "I8"),
    (25, "I16"),
    (26, "I32"),
    (27, "I64"),
    (28, "F64"),
    (29, "IQ1_M"),
    (30, "BF16"),
    (34, "TQ1_0"),
    (35, "TQ2_0"),
    (39, "MXFP4"),
];

/// ggml's name of a type code (`"IQ2_XXS"`), `None` for a code ggml does not define.
pub fn type_name(code: u32) -> Option<&'static str> {
    NAMES.iter().find(|(c, _)| *c == code).map(|(_, n)| *n)
}

/// How a format's values sit in memory, which decides the panel a matrix of it packs into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// One f32 per value.
    F32,
    /// One 16-bit pattern per value, widened exactly (BF16, F16).
    Half,
    /// Blocks of `block_len` values in `block_bytes` bytes (ggml's quantized types).
    Blocks,
}

/// One scalar reference dequantizer: one stored block into its `block_len` values.
pub type DequantizeBlock = fn(&[u8], &mut [f32]);
/// One reference quantizer: one block of `block_len` values appended as stored bytes.
pub type QuantizeBlock = fn(&[f32], &mut Vec<u8>);

/// Everything about one stored format (ggml's `type_traits`): a property of a format is a
/// column here, never a `match` over the formats, so adding a format is adding a row (and
/// its kernels).
#[derive(Clone, Copy, Debug)]
pub struct FormatTraits {
    /// The id (the row's position in [`FORMATS`]).
    pub ty: GgmlType,
    /// The GGUF/ggml type code.
    pub code: u32,
    /// ggml's name (`"Q4_K"`), also safetensors' dtype spelling for the element formats.
    pub name: &'static str,
    /// Values per block (1 for the element formats).
    pub block_len: usize,
    /// Bytes per block as stored (ggml-common.h's `block_*` structs).
    pub block_bytes: usize,
    /// Bytes per block in the GEMM's panels: the stored block's, except Q6_K, whose codes
    /// are widened to a byte each in memory (274 bytes, not 210: its bit planes cost as much
    /// to unpack as the rest of the row; a byte per code runs at Q8_0's speed).
    pub panel_block_bytes: usize,
    /// Storage layout.
    pub layout: Layout,
    /// The code the WGSL and CUDA matrix kernels switch on for a weight they read as stored
    /// (`None`: the GPU backends widen it to f32 at load). F32 is the kernels' code 0.
    pub gpu: Option<u32>,
    /// The scalar reference dequantizer every tier's kernel must match bit for bit.
    pub dequantize: DequantizeBlock,
    /// ggml's reference quantizer, where this engine writes the format.
    pub quantize: Option<QuantizeBlock>,
    /// The q8 numerics mode's pairing: the activation blocks this type's dot takes (ggml's
    /// `vec_dot_type`) and the block's integer reading (`q8_dot.rs`); `None`: the type runs
    /// with f32 activations in either mode.
    pub(crate) q8: Option<(ActBlocks, DecodeInt)>,
}

/// A format row: `gpu` and `quantize` in the trailing `Option`s.
#[allow(clippy::too_many_arguments)]
const fn row(
    ty: GgmlType,
    code: u32,
    name: &'static str,
    block_len: usize,
    block_bytes: usize,
    layout: Layout,
    gpu: Option<u32>,
    dequantize: DequantizeBlock,
    quantize: Option<QuantizeBlock>,
    q8: Option<(ActBlocks, DecodeInt)>,
) -> FormatTraits {
    FormatTraits {
        ty,
        code,
        name,
        block_len,
        block_bytes,
        panel_block_bytes: block_bytes,
        layout,
        gpu,
        dequantize,
        quantize,
        q8,
    }
}

use ActBlocks::{Q8K as A8K, Q8_0 as A8_0, Q8_1 as A8_1};
use Layout::{Blocks, Half, F32 as Word};

/// The format table, one row per [`GgmlType`] in its declaration order. Columns: id, ggml
/// code, name, block length, block bytes, layout, GPU code, reference dequantizer, reference
/// quantizer (block sizes as ggml-common.h spells them), q8 pairing.
#[rustfmt::skip]
pub static FORMATS: [FormatTraits; 14] = [
    row(GgmlType::F32,  0,  "F32",  1,    4,                                   Word,   Some(0),  dequant::f32_le,  None,                     None),
    row(GgmlType::F16,  1,  "F16",  1,    2,                                   Half,   Some(2),  dequant::f16_le,  None,                     None),
    row(GgmlType::BF16, 30, "BF16", 1,    2,                                   Half,   Some(1),  dequant::bf16_le, None,                     None),
    row(GgmlType::Q4_0, 2,  "Q4_0", 32,   2 + 16,                              Blocks, Some(4),  dequant::q4_0,    Some(quantize_ref::q4_0), Some((A8_0, q8_dot::q4_0))),
    row(GgmlType::Q4_1, 3,  "Q4_1", 32,   2 + 2 + 16,                          Blocks, Some(5),  dequant::q4_1,    Some(quantize_ref::q4_1), Some((A8_1, q8_dot::q4_1))),
    row(GgmlType::Q5_0, 6,  "Q5_0", 32,   2 + 4 + 16,                          Blocks, Some(6),  dequant::q5_0,    Some(quantize_ref::q5_0), Some((A8_0, q8_dot::q5_0))),
    row(GgmlType::Q5_1, 7,  "Q5_1", 32,   2 + 2 + 4 + 16,                      Blocks, Some(7),  dequant::q5_1,    Some(quantize_ref::q5_1), Some((A8_1, q8_dot::q5_1))),
    row(GgmlType::Q8_0, 8,  "Q8_0", 32,   2 + 32,                              Blocks, Some(3),  dequant::q8_0,    Some(quantize_ref::q8_0), Some((A8_0, q8_dot::q8_0))),
    row(GgmlType::Q2_K, 10, "Q2_K", QK_K, QK_K / 16 + QK_K / 4 + 2 + 2,        Blocks, None,     dequant::q2_k,    None,                     Some((A8K, q8_dot::q2_k))),
    row(GgmlType::Q3_K, 11, "Q3_K", QK_K, QK_K / 8 + QK_K / 4 + 12 + 2,        Blocks, None,     dequant::q3_k,    None,                     Some((A8K, q8_dot::q3_k))),
    row(GgmlType::Q4_K, 12, "Q4_K", QK_K, 2 + 2 + 12 + QK_K / 2,               Blocks, Some(8),  dequant::q4_k,    Some(quantize_k::q4_k),   Some((A8K, q8_dot::q4_k))),
    row(GgmlType::Q5_K, 13, "Q5_K", QK_K, 2 + 2 + 12 + QK_K / 8 + QK_K / 2,    Blocks, Some(9),  dequant::q5_k,    Some(quantize_k::q5_k),   Some((A8K, q8_dot::q5_k))),
    // Q6_K's panels widen its codes to a byte each (see `panel_block_bytes`).
    FormatTraits {
        panel_block_bytes: 2 + 16 + QK_K,
        ..row(GgmlType::Q6_K, 14, "Q6_K", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + 2, Blocks, Some(10), dequant::q6_k, Some(quantize_k::q6_k), Some((A8K, q8_dot::q6_k)))
    },
    row(GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 2 + 16,                            Blocks, None,     dequant::iq4_nl,  None,                     Some((A8_0, q8_dot::iq4_nl))),
];

// The table is indexed by the id: row `i` must be the type whose discriminant is `i`.
const _: () = {
    let mut i = 0;
    while i < FORMATS.len() {
        assert!(FORMATS[i].ty as usize == i, "FORMATS out of GgmlType order");
        i += 1;
    }
};

/// Whether [`quantize`] writes `t` (its row of [`FORMATS`] has a reference quantizer).
pub const fn can_quantize(t: GgmlType) -> bool {
    t.traits().quantize.is_some()
}

/// Quantizes `x` (whole blocks of `t`'s 32 or 256 values) into `t`'s blocks, appended to
/// `out`.
///
/// # Panics
/// If `t` is not one [`can_quantize`] accepts or `x` is not whole blocks (callers check both,
/// and that the values are finite, first).
pub fn quantize(t: GgmlType, x: &[f32], out: &mut Vec<u8>) {
    let f = t.traits();
    let q = f
        .quantize
        .unwrap_or_else(|| panic!("no reference quantizer for {}", f.name));
    let bl = f.block_len;
    assert!(x.len().is_multiple_of(bl), "quantize: not whole blocks");
    out.reserve(x.len() / bl * f.block_bytes);
    for b in x.chunks_exact(bl) {
        q(b, out);
    }
}

impl GgmlType {
    /// Every type, in declaration (and [`FORMATS`] row) order.
    pub const ALL: [GgmlType; 14] = {
        let mut all = [GgmlType::F32; FORMATS.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = FORMATS[i].ty;
            i += 1;
        }
        all
    };

    /// This type's row of the format table.
    pub const fn traits(self) -> &'static FormatTraits {
        &FORMATS[self as usize]
    }

    /// The type a GGUF type code names, `None` when this engine does not read it (see
    /// [`type_name`] for its name).
    pub fn from_code(code: u32) -> Option<Self> {
        FORMATS.iter().find(|f| f.code == code).map(|f| f.ty)
    }

    /// The GGUF/ggml type code.
    pub const fn code(self) -> u32 {
        self.traits().code
    }

    /// ggml's name (`"Q4_K"`).
    pub const fn name(self) -> &'static str {
        self.traits().name
    }

    /// The activation blocks this type's products take in the q8 numerics mode (ggml's
    /// `vec_dot_type`); `None`: it runs with f32 activations in either mode.
    pub fn q8_activations(self) -> Option<ActBlocks> {
        self.traits().q8.map(|(a, _)| a)
    }

    /// Values per block.
    pub const fn block_len(self) -> usize {
        self.traits().block_len
    }

    /// Bytes per block (ggml-common.h's `block_*` structs).
    pub const fn block_bytes(self) -> usize {
        self.traits().block_bytes
    }

    /// Bytes of a row of `n` values: `None` when `n` is not whole blocks or the size
    /// overflows (a reader turns either into an error naming the tensor).
    pub fn row_bytes(self, n: usize) -> Option<usize> {
        if !n.is_multiple_of(self.block_len()) {
            return None;
        }
        (n / self.block_len()).checked_mul(self.block_bytes())
    }

    /// [`GgmlType::dequantize`] into a new vector (`bytes` whole blocks).
    pub fn dequantize_to_vec(self, bytes: &[u8]) -> Vec<f32> {
        let mut out = vec![0.0; bytes.len() / self.block_bytes() * self.block_len()];
        self.dequantize(bytes, &mut out);
        out
    }

    /// The scalar reference dequantizer: `bytes` (whole blocks, as stored) into `out`
    /// (`block_len` values per block), `gguf.quants.dequantize`'s bits.
    ///
    /// # Panics
    /// If `bytes` is not whole blocks or `out` does not hold their values.
    pub fn dequantize(self, bytes: &[u8], out: &mut [f32]) {
        let f = self.traits();
        let (bb, bl) = (f.block_bytes, f.block_len);
        assert!(
            bytes.len().is_multiple_of(bb) && out.len() == bytes.len() / bb * bl,
            "dequantize: {} bytes of {} into {} values",
            bytes.len(),
            f.name,
            out.len()
        );
        for (b, o) in bytes.chunks_exact(bb).zip(out.chunks_exact_mut(bl)) {
            (f.dequantize)(b, o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_matches_ggml() {
        // ggml-common.h's static_asserts on sizeof(block_*).
        let want = [
            (GgmlType::Q4_0, 18),
            (GgmlType::Q4_1, 20),
            (GgmlType::Q5_0, 22),
            (GgmlType::Q5_1, 24),
            (GgmlType::Q8_0, 34),
            (GgmlType::Q2_K, 84),
            (GgmlType::Q3_K, 110),
            (GgmlType::Q4_K, 144),
            (GgmlType::Q5_K, 176),
            (GgmlType::Q6_K, 210),
        ];
        for (t, bytes) in want {
            assert_eq!(t.block_bytes(), bytes, "{}", t.name());
        }
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_code(t.code()), Some(t));
        }
        assert_eq!(GgmlType::from_code(16), None);
        assert_eq!(type_name(16), Some("IQ2_XXS"));
        assert_eq!(type_name(4), None);
    }

    #[test]
    fn table_rows_agree_with_ggml_names_and_gpu_codes_are_distinct() {
        // NAMES spells every ggml code (for errors about unread ones); a row may not drift.
        for f in &FORMATS {
            assert_eq!(type_name(f.code), Some(f.name), "{}", f.name);
        }
        // The GPU kernels switch on `gpu`: two rows with one code would read each other's.
        let codes: Vec<u32> = FORMATS.iter().filter_map(|f| f.gpu).collect();
        let mut unique = codes.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), codes.len(), "GPU codes repeat: {codes:?}");
    }

    #[test]
    fn row_bytes_checks_blocks_and_overflow() {
        assert_eq!(GgmlType::Q4_0.row_bytes(64), Some(36));
        assert_eq!(GgmlType::Q4_0.row_bytes(33), None);
        assert_eq!(GgmlType::Q6_K.row_bytes(255), None);
        assert_eq!(GgmlType::F32.row_bytes(usize::MAX), None);
    }
}
