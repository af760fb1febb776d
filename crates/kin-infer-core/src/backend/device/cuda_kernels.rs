//! The CUDA backend's kernels, generated from the bodies the WGSL kernels are generated from
//! (`bodies.rs`): the same names, parameter structs and buffer order. Parameters arrive by
//! value as `P_<kernel>` (generated from `params.rs`, padded to 16 words), buffers as
//! pointers, and the flat invocation index is built from the block grid the same way. The
//! prelude below gives the bodies' dialect its C meaning (`u32`/`f32`/`i32`, `select`, and
//! `fma`/`exp`/`sqrt` as the float functions) and the helpers (`tanh_k`, `erf_k`, `act_k`,
//! `wq`), which are written here and in `wgsl.rs`.
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
__device__ __forceinline__ float select(float f, float t, bool c) { return c ? t : f; }
__device__ __forceinline__ unsigned select(unsigned f, unsigned t, bool c) { return c ? t : f; }
__device__ __forceinline__ unsigned flat() {
    return (blockIdx.y * gridDim.x + blockIdx.x) * 64u + threadIdx.x;
}
__device__ float tanh_k(float x) {
    float s = fabsf(x);
    if (s > TANH_SPLIT) {
        float e = expf(fminf(s + s, 88.0f));
        float big = 1.0f - 2.0f / (e + 1.0f);
        return x < 0.0f ? -big : big;
    }
    float z = x * x;
    float q = TANH_P0;
    q = fmaf(q, z, TANH_P1);
    q = fmaf(q, z, TANH_P2);
    q = fmaf(q, z, TANH_P3);
    q = fmaf(q, z, TANH_P4);
    return fmaf(q * z, x, x);
}
__device__ float erf_k(float a) {
    float t = fabsf(a);
    float s = a * a;
    if (t > ERF_SPLIT) {
        float r = fmaf(ERF_B0, t, ERF_B1);
        float u = fmaf(ERF_B2, t, ERF_B3);
        r = fmaf(r, s, u);
        r = fmaf(r, t, ERF_B4);
        r = fmaf(r, t, ERF_B5);
        r = fmaf(r, t, ERF_B6);
        r = fmaf(r, t, -t);
        float v = 1.0f - expf(r);
        return a < 0.0f ? -v : v;
    }
    float q = ERF_S0;
    q = fmaf(q, s, ERF_S1);
    q = fmaf(q, s, ERF_S2);
    q = fmaf(q, s, ERF_S3);
    q = fmaf(q, s, ERF_S4);
    q = fmaf(q, s, ERF_S5);
    return fmaf(q, a, a);
}
__device__ __forceinline__ unsigned byte_at(const unsigned* w, unsigned b) { return (w[b >> 2] >> ((b & 3u) * 8u)) & 255u; }
__device__ __forceinline__ unsigned half_at(const unsigned* w, unsigned b) { return (w[b >> 2] >> ((b & 2u) * 8u)) & 65535u; }
__device__ float f16_k(unsigned h) {
    unsigned s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u;
    if (e == 0u) { float v = (float)m * 5.9604645e-8f; return s ? -v : v; }
    if (e == 31u) return __uint_as_float(s | 0x7f800000u | (m << 13));
    return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ unsigned qh5(const unsigned* w, unsigned b, unsigned i) { return (byte_at(w, b + i / 8u) >> (i % 8u)) & 1u; }
__device__ __forceinline__ unsigned nib(const unsigned* w, unsigned b, unsigned j) {
    unsigned v = byte_at(w, b + j % 16u);
    return j >= 16u ? v >> 4 : v & 15u;
}
__device__ void scale_min(const unsigned* w, unsigned sc, unsigned j, unsigned* s, unsigned* m) {
    if (j < 4u) { *s = byte_at(w, sc + j) & 63u; *m = byte_at(w, sc + 4u + j) & 63u; return; }
    unsigned i = j - 4u;
    *s = (byte_at(w, sc + 8u + i) & 15u) | ((byte_at(w, sc + i) >> 2) & 48u);
    *m = (byte_at(w, sc + 8u + i) >> 4) | ((byte_at(w, sc + 4u + i) >> 2) & 48u);
}
__device__ float wq(const unsigned* w, unsigned fmt, unsigned base, unsigned t) {
    switch (fmt) {
        case F_BF16: return __uint_as_float(half_at(w, base + 2u * t) << 16);
        case F_F16: return f16_k(half_at(w, base + 2u * t));
        case F_Q8_0: {
            unsigned bb = base + (t / 32u) * 34u;
            int q = (int)(byte_at(w, bb + 2u + t % 32u) << 24) >> 24;
            return __fmul_rn((float)q, f16_k(half_at(w, bb)));
        }
        case F_Q4_0: {
            unsigned bb = base + (t / 32u) * 18u;
            return __fmul_rn(f16_k(half_at(w, bb)), (float)((int)nib(w, bb + 2u, t % 32u) - 8));
        }
        case F_Q4_1: {
            unsigned bb = base + (t / 32u) * 20u;
            unsigned q = nib(w, bb + 4u, t % 32u);
            return __fadd_rn(__fmul_rn(f16_k(half_at(w, bb)), (float)q), f16_k(half_at(w, bb + 2u)));
        }
        case F_Q5_0: {
            unsigned bb = base + (t / 32u) * 22u, j = t % 32u;
            unsigned q = nib(w, bb + 6u, j) | (qh5(w, bb + 2u, j) << 4);
            return __fmul_rn(f16_k(half_at(w, bb)), (float)((int)q - 16));
        }
        case F_Q5_1: {
            unsigned bb = base + (t / 32u) * 24u, j = t % 32u;
            unsigned q = nib(w, bb + 8u, j) | (qh5(w, bb + 4u, j) << 4);
            return __fadd_rn(__fmul_rn(f16_k(half_at(w, bb)), (float)q), f16_k(half_at(w, bb + 2u)));
        }
        case F_Q4_K:
        case F_Q5_K: {
            bool five = fmt == F_Q5_K;
            unsigned bb = base + (t / 256u) * (five ? 176u : 144u);
            unsigned e = t % 256u, j = e / 32u, l = e % 32u;
            unsigned qs = bb + (five ? 48u : 16u);
            unsigned q = (byte_at(w, qs + (j / 2u) * 32u + l) >> (4u * (j % 2u))) & 15u;
            if (five) q |= ((byte_at(w, bb + 16u + l) >> j) & 1u) << 4;
            unsigned s, m;
            scale_min(w, bb + 4u, j, &s, &m);
            float ds = __fmul_rn(f16_k(half_at(w, bb)), (float)s);
            float dm = __fmul_rn(f16_k(half_at(w, bb + 2u)), (float)m);
            return __fsub_rn(__fmul_rn(ds, (float)q), dm);
        }
        default: { // F_Q6_K
            unsigned bb = base + (t / 256u) * 210u;
            unsigned e = t % 256u, h = e / 128u, r = e % 128u;
            unsigned lo = (byte_at(w, bb + h * 64u + r % 64u) >> (4u * (r / 64u))) & 15u;
            unsigned hi = (byte_at(w, bb + 128u + h * 32u + r % 32u) >> (2u * (r / 32u))) & 3u;
            int q = (int)(lo | (hi << 4)) - 32;
            int sc = (int)(byte_at(w, bb + 192u + e / 16u) << 24) >> 24;
            float ds = __fmul_rn(f16_k(half_at(w, bb + 208u)), (float)sc);
            return __fmul_rn(ds, (float)q);
        }
    }
}
__device__ float act_k(float x, unsigned act) {
    switch (act) {
        case 0u: return x / (1.0f + expf(fminf(-x, 88.0f)));
        case 1u: return (0.5f * x) * (1.0f + erf_k(x * 0.70710677f));
        case 2u: {
            float u = fmaf(0.044715f * x * x, x, x);
            return (0.5f * x) * (1.0f + tanh_k(0.7978846f * u));
        }
        case 3u: return fmaxf(x, 0.0f);
        default: return tanh_k(x);
    }
}
"#;

/// Every kernel's name (the same set as the WGSL kernels: `params.rs`'s).
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    super::params::KERNELS.iter().map(|(op, _)| *op)
}

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
    let mut out = format!("{defines}{codes}{structs}{PRELUDE}");
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
