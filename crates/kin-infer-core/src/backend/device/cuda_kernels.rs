//! The CUDA backend's kernels, generated from the bodies the WGSL kernels are generated from
//! (`bodies.rs`): the same names, parameter structs and buffer order. Parameters arrive by
//! value as `P_<kernel>` (generated from `params.rs`, padded to 16 words), buffers as
//! pointers, and the flat invocation index is built from the block grid the same way. The
//! prelude below gives the kernel dialect (`dialect.rs`) its C meaning: `u32`/`f32`/`i32`,
//! `select`, `fma`/`exp`/`sqrt`/`abs` as the float functions, `mul_rn`/`add_rn`/`sub_rn` as
//! the unfused intrinsics.
//!
//! Compiled at run time by NVRTC when the CUDA backend starts (see `cuda.rs`), with its
//! default IEEE-exact division and square root (no fast math).

const PRELUDE: &str = r#"
typedef unsigned u32;
typedef float f32;
typedef int i32;
#define fma fmaf
#define exp expf
#define sqrt sqrtf
#define abs fabsf
#define mul_rn __fmul_rn
#define add_rn __fadd_rn
#define sub_rn __fsub_rn
#define bitcast_f32 __uint_as_float
__device__ __forceinline__ float select(float f, float t, bool c) { return c ? t : f; }
__device__ __forceinline__ unsigned select(unsigned f, unsigned t, bool c) { return c ? t : f; }
__device__ __forceinline__ unsigned flat() {
    return (blockIdx.y * gridDim.x + blockIdx.x) * 64u + threadIdx.x;
}
"#;

/// Every kernel's name (the same set as the WGSL kernels: `params.rs`'s).
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    super::params::KERNELS.iter().map(|(op, _)| *op)
}

use super::dialect::{self, to_cuda};

/// The whole CUDA C source: the CPU's math constants, the format codes, the parameter
/// structs, the prelude, and every kernel of `bodies.rs` (its signature from its buffers, its
/// `weight` a lambda, its body as written: the dialect is C with the prelude's typedefs).
pub fn source() -> String {
    let defines: String = super::math_constants()
        .iter()
        .map(|(name, v)| format!("#define {name} ({v:e}f)\n"))
        .collect();
    let codes: String = super::params::format_codes()
        .iter()
        .map(|(name, c)| format!("#define {name} {c}u\n"))
        .collect();
    let structs = super::params::cuda_structs();
    let helpers = to_cuda(dialect::HELPERS) + &to_cuda(dialect::WQ);
    let mut out = format!("{defines}{codes}{structs}{PRELUDE}{helpers}");
    for k in super::bodies::BODIES {
        let bufs: Vec<String> = k
            .bufs
            .iter()
            .map(|(name, ty, write)| {
                let ty = if *ty == "u32" { "unsigned" } else { "float" };
                let cv = if *write { "" } else { "const " };
                format!("{cv}{ty}* {name}")
            })
            .collect();
        out += &format!(
            "extern \"C\" __global__ void {op}(P_{op} p, {bufs}) {{\n    u32 i = flat();\n",
            op = k.op,
            bufs = bufs.join(", ")
        );
        if let Some(w) = k.weight {
            out += &format!("    auto weight = [&](u32 c, u32 t) -> f32 {{ return {w}; }};\n");
        }
        out += k.body;
        out += "}\n";
    }
    out
}
