//! One description per GPU kernel: its name and its parameters, named and typed, in order.
//!
//! Each kernel's parameters are a struct here. ops.rs fills it by field name, its words go to
//! the device as the kernel's parameter block, and the WGSL and CUDA sources declare the same
//! struct, generated from this one list ([`wgsl_struct`], [`cuda_structs`]), so a shader reads
//! `p.rows`, never a position three files must agree on. A field is a `u32` (counts, element
//! offsets, codes, flags) or an `f32` (passed as its bits). The format codes in the sources
//! (`F_Q8_0`, ...) are likewise generated from the format table ([`format_codes`]).

#[cfg(any(feature = "wgpu", feature = "cuda"))]
use crate::kernels::ggml::GgmlType;

/// A parameter word's type in the two kernel languages.
pub(crate) trait Word: Copy {
    const WGSL: &'static str;
    const CUDA: &'static str;
    fn word(self) -> u32;
}

impl Word for u32 {
    const WGSL: &'static str = "u32";
    const CUDA: &'static str = "unsigned";
    fn word(self) -> u32 {
        self
    }
}

impl Word for f32 {
    const WGSL: &'static str = "f32";
    const CUDA: &'static str = "float";
    fn word(self) -> u32 {
        self.to_bits()
    }
}

/// A kernel's parameters: which kernel, and its words in the declared order.
pub(crate) trait Params {
    const OP: &'static str;
    fn words(&self) -> Vec<u32>;
}

/// A kernel's parameter fields: `(name, WGSL type, CUDA type)`, in order.
pub(crate) type Layout = &'static [(&'static str, &'static str, &'static str)];

macro_rules! kernels {
    ($($(#[doc = $doc:literal])* $name:ident = $op:literal { $($field:ident: $ty:ty),* $(,)? })*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Clone, Copy, Debug)]
            pub(crate) struct $name { $(pub(crate) $field: $ty,)* }

            impl Params for $name {
                const OP: &'static str = $op;
                fn words(&self) -> Vec<u32> {
                    vec![$(Word::word(self.$field)),*]
                }
            }
        )*

        /// Every kernel's name and parameter layout (the set both backends compile).
        pub(crate) const KERNELS: &[(&str, Layout)] = &[
            $(($op, &[$((stringify!($field), <$ty as Word>::WGSL, <$ty as Word>::CUDA)),*]),)*
        ];
    };
}

kernels! {
    /// `o[r][j0 + c] = x[r] · w[c] (+ b[bo + j0 + c])` for one column group of `gn` outputs of
    /// `ntot` (the output row stride), weights `[gn, k]` in f32.
    Linear = "linear" {
        rows: u32, k: u32, gn: u32, ntot: u32, j0: u32, xo: u32, oo: u32, has_bias: u32, bo: u32,
    }
    /// [`Linear`] over weights in a stored format (`fmt`, rows `row_bytes` apart).
    LinearQ = "linear_q" {
        rows: u32, k: u32, gn: u32, ntot: u32, j0: u32, xo: u32, oo: u32, has_bias: u32, bo: u32,
        fmt: u32, row_bytes: u32,
    }
    /// Rows `ids[r]` of a weight in a stored format, as f32, from element `oo` of the output.
    GatherQ = "gather_q" { rows: u32, k: u32, oo: u32, fmt: u32, row_bytes: u32 }
    /// `o[i][j] = Σ_t a[i][t] · b[t][j]`.
    Matmul = "matmul" {
        m: u32, k: u32, n: u32, lda: u32, ldb: u32, ao: u32, bo: u32, oo: u32,
    }
    /// Layer norm in place, one invocation per row.
    LayerNorm = "layer_norm" { rows: u32, width: u32, xo: u32, eps: f32 }
    /// RMS norm into `o`, one invocation per row.
    RmsNorm = "rms_norm" { rows: u32, width: u32, xo: u32, oo: u32, eps: f32 }
    /// Elementwise in place: `op` 0..4 an activation, 5 scale by `s`, 6 softcap at `s`.
    Unary = "unary" { len: u32, xo: u32, op: u32, s: f32 }
    /// `x op= y`: `op` 0 add, 1 mul.
    Binary = "binary" { len: u32, xo: u32, yo: u32, op: u32 }
    /// `o[r][j] = act(gate) · up` of `[gate | up]` rows.
    Glu = "glu" { rows: u32, width: u32, act: u32, go: u32, oo: u32 }
    /// Row `r` of `o` (`=`, or `+=` when `add`) row `ids[r]` of the table.
    Gather = "gather" { rows: u32, width: u32, oo: u32, add: u32 }
    /// Rotary embedding in place, one invocation per rotated pair.
    Rope = "rope" {
        rows: u32, stride: u32, width: u32, head_dim: u32, dim: u32, interleaved: u32, xo: u32,
    }
    /// Bidirectional attention scores of one sequence (`qo`: its first row in qkv); `kind` 0
    /// no bias, 1 relative, 2 alibi, 3 dense (from element `bo`).
    AttnScores = "attn_scores" {
        len: u32, heads: u32, hd: u32, qo: u32, scale: f32, kind: u32, max_len: u32, bo: u32,
    }
    /// Softmax of rows in place; with `causal`, row `t` of a chunk holds the keys of position
    /// `pos0 + t / heads` (the last `window`, 0 = all).
    Softmax = "softmax" {
        rows: u32, width: u32, xo: u32, causal: u32, heads: u32, pos0: u32, window: u32,
    }
    /// Context of one sequence from its probabilities.
    AttnContext = "attn_context" { len: u32, heads: u32, hd: u32, qo: u32, oo: u32 }
    /// Appends rows' keys (transposed, `[kv_dim, capacity]`) and values to the cache.
    KvAppend = "kv_append" {
        rows: u32, q_dim: u32, kv_dim: u32, start: u32, capacity: u32, qo: u32, ko: u32, vo: u32,
    }
    /// Causal scores of a chunk of `cr` query rows at positions `pos0 + r` (`softcap` 0: none).
    CausalScores = "causal_scores" {
        cr: u32, heads: u32, hd: u32, kv_group: u32, q_stride: u32, qo: u32, ko: u32,
        capacity: u32, pos0: u32, window: u32, scale: f32, softcap: f32, span: u32, so: u32,
    }
    /// Causal context of a chunk from its probabilities.
    CausalContext = "causal_context" {
        cr: u32, heads: u32, hd: u32, kv_group: u32, kv_dim: u32, vo: u32, capacity: u32,
        pos0: u32, window: u32, so: u32, oo: u32,
    }
    /// One sequence, one pooling `mode` (0 cls, 1 last, 2 max, 3 mean, 4 mean/sqrt(len),
    /// 5 weighted mean).
    Pool = "pool" { start: u32, len: u32, hidden: u32, mode: u32, xo: u32, oo: u32 }
    /// L2 normalization per row.
    Normalize = "normalize" { rows: u32, width: u32, xo: u32 }
    /// Strided copy `o[r][c] = x[r][c]`, or with `transpose` `o[c][r] = x[r][c]`.
    Copy2d = "copy2d" {
        rows: u32, cols: u32, src_stride: u32, dst_stride: u32, xo: u32, oo: u32, transpose: u32,
    }
    /// `x[r][c] = fma(s[r], y[r][c], x[r][c])`.
    RowAxpy = "row_axpy" { rows: u32, width: u32, xo: u32, so: u32, yo: u32 }
    /// Divides columns `col0..col0 + width` of each row by `s`.
    DivideColumns = "divide_columns" {
        rows: u32, stride: u32, col0: u32, width: u32, xo: u32, s: f32,
    }
    /// One sequence, one group `g` of a grouped 1-D convolution (same padding).
    Conv1d = "conv1d" {
        start: u32, len: u32, channels: u32, kernel: u32, cg: u32, og: u32, width: u32, g: u32,
        xo: u32, oo: u32,
    }
    /// DeBERTa's disentangled bias of one sequence.
    Disentangled = "disentangled" {
        start: u32, len: u32, heads: u32, hd: u32, max_len: u32, qo: u32, oo: u32,
        has_c2p: u32, has_p2c: u32, divide: u32, divide_by: f32,
    }
}

impl Linear {
    /// The same product over weights in a stored format.
    pub(crate) fn stored(self, fmt: u32, row_bytes: u32) -> LinearQ {
        LinearQ {
            rows: self.rows,
            k: self.k,
            gn: self.gn,
            ntot: self.ntot,
            j0: self.j0,
            xo: self.xo,
            oo: self.oo,
            has_bias: self.has_bias,
            bo: self.bo,
            fmt,
            row_bytes,
        }
    }
}

// Every parameter block fits the words a launch passes (CUDA passes exactly that many).
const _: () = {
    let mut i = 0;
    while i < KERNELS.len() {
        assert!(
            KERNELS[i].1.len() <= super::MAX_PARAMS,
            "a kernel with too many parameters"
        );
        i += 1;
    }
};

/// The layout of kernel `op`.
#[cfg(feature = "wgpu")]
fn layout(op: &str) -> Layout {
    KERNELS
        .iter()
        .find(|(name, _)| *name == op)
        .map(|(_, l)| *l)
        .unwrap_or_else(|| panic!("no kernel `{op}`"))
}

/// Kernel `op`'s parameter block in WGSL: its struct and binding 0.
#[cfg(feature = "wgpu")]
pub(crate) fn wgsl_struct(op: &str) -> String {
    let fields: String = layout(op)
        .iter()
        .map(|(name, ty, _)| format!("    {name}: {ty},\n"))
        .collect();
    format!("struct Params {{\n{fields}}}\n@group(0) @binding(0) var<storage, read> p: Params;\n")
}

/// Every kernel's parameter struct in CUDA C (`P_<op>`), padded to
/// [`super::MAX_PARAMS`] words: the block is passed by value at that size.
#[cfg(feature = "cuda")]
pub(crate) fn cuda_structs() -> String {
    KERNELS
        .iter()
        .map(|(op, l)| {
            let fields: String = l.iter().map(|(n, _, ty)| format!(" {ty} {n};")).collect();
            let pad = super::MAX_PARAMS - l.len();
            let pad = if pad > 0 {
                format!(" unsigned pad_[{pad}];")
            } else {
                String::new()
            };
            format!("struct P_{op} {{{fields}{pad} }};\n")
        })
        .collect()
}

/// The stored formats' GPU codes as named constants, `(name, code)`: `F_BF16`, `F_Q8_0`, ...
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub(crate) fn format_codes() -> Vec<(String, u32)> {
    GgmlType::ALL
        .iter()
        .filter_map(|t| t.traits().gpu.map(|c| (format!("F_{}", t.name()), c)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_layout_fits_the_parameter_block_and_names_are_distinct() {
        for (i, (op, l)) in KERNELS.iter().enumerate() {
            assert!(
                l.len() <= super::super::MAX_PARAMS,
                "{op}: too many parameters"
            );
            assert!(KERNELS[..i].iter().all(|(o, _)| o != op), "{op} twice");
            for (j, (f, _, _)) in l.iter().enumerate() {
                assert!(l[..j].iter().all(|(g, _, _)| g != f), "{op}.{f} twice");
            }
        }
    }

    #[cfg(feature = "wgpu")]
    #[test]
    fn every_kernel_has_a_wgsl_shader() {
        for (op, _) in KERNELS {
            assert!(super::super::wgsl::source(op).is_some(), "no shader `{op}`");
        }
    }
}
