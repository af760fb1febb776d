//! The wgpu backend's WGSL compute shaders, one per operation, generated from the kernel
//! bodies of `bodies.rs` (which the CUDA kernels are generated from too).
//!
//! Conventions (every shader): binding 0 is the op's parameters, a struct `p` generated from
//! its description in `params.rs` (fields read by name: `p.rows`), bindings 1.. the tensors
//! in the order the Rust side passes them; every binding is read by the shader (the
//! pipelines' layouts are derived from what each entry point uses).
//! Views are whole buffers plus an element offset in the parameters, so no binding offset has
//! to meet the device's alignment. One invocation computes one output element (or one row) with
//! a sequential loop: each element's reduction has one fixed order whatever the batch, so
//! results are identical run to run and across batch compositions (no atomics anywhere).
//! Invocations are numbered by [`PRELUDE`]'s `flat` over a 2-D grid of 64-wide workgroups
//! (one dimension alone stops at 65,535 workgroups).

/// Shared by every shader: the flat invocation index and the math
/// functions with the CPU's polynomials (`kernels::math`), so both backends approximate erf
/// and tanh the same way (WGSL has no erf; its tanh's accuracy is the platform's).
const PRELUDE: &str = r#"
fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 { return gid.x + gid.y * nwg.x * 64u; }
fn tanh_k(x: f32) -> f32 {
    let s = abs(x);
    if (s > TANH_SPLIT) {
        // exp(2|x|) overflows to inf past |x| ~ 44: 2/inf = 0, tanh = ±1.
        let e = exp(min(s + s, 88.0));
        let big = 1.0 - 2.0 / (e + 1.0);
        return select(big, -big, x < 0.0);
    }
    let z = x * x;
    var q = TANH_P0;
    q = fma(q, z, TANH_P1);
    q = fma(q, z, TANH_P2);
    q = fma(q, z, TANH_P3);
    q = fma(q, z, TANH_P4);
    return fma(q * z, x, x);
}
fn erf_k(a: f32) -> f32 {
    let t = abs(a);
    let s = a * a;
    if (t > ERF_SPLIT) {
        var r = fma(ERF_B0, t, ERF_B1);
        let u = fma(ERF_B2, t, ERF_B3);
        r = fma(r, s, u);
        r = fma(r, t, ERF_B4);
        r = fma(r, t, ERF_B5);
        r = fma(r, t, ERF_B6);
        r = fma(r, t, -t);
        let v = 1.0 - exp(r);
        return select(v, -v, a < 0.0);
    }
    var q = ERF_S0;
    q = fma(q, s, ERF_S1);
    q = fma(q, s, ERF_S2);
    q = fma(q, s, ERF_S3);
    q = fma(q, s, ERF_S4);
    q = fma(q, s, ERF_S5);
    return fma(q, a, a);
}
// act: 0 silu, 1 gelu (erf), 2 gelu (tanh), 3 relu, 4 tanh
fn act_k(x: f32, act: u32) -> f32 {
    switch act {
        case 0u: { return x / (1.0 + exp(min(-x, 88.0))); }
        case 1u: { return (0.5 * x) * (1.0 + erf_k(x * 0.70710677)); }
        case 2u: {
            let u = fma(0.044715 * x * x, x, x);
            return (0.5 * x) * (1.0 + tanh_k(0.7978846 * u));
        }
        case 3u: { return max(x, 0.0); }
        default: { return tanh_k(x); }
    }
}
"#;

/// Shader `op`'s whole source: the CPU's constants (as exact decimal literals), the format
/// codes, its parameter struct (`params.rs`), [`PRELUDE`], its bindings, [`WQ`] where it
/// binds a `u32` buffer `w`, its `weight`, and its body (`bodies.rs`) in an entry point.
/// `None` if there is no kernel `op`.
pub(super) fn source(op: &str) -> Option<String> {
    let k = super::bodies::body(op)?;
    let consts: String = super::math_constants()
        .iter()
        .map(|(name, v)| format!("const {name}: f32 = {v:e};\n"))
        .collect();
    let codes: String = super::params::format_codes()
        .iter()
        .map(|(name, c)| format!("const {name}: u32 = {c}u;\n"))
        .collect();
    let params = super::params::wgsl_struct(op);
    let mut out = format!("{consts}{codes}{params}{PRELUDE}");
    for (j, (name, ty, write)) in k.bufs.iter().enumerate() {
        let access = if *write { "read_write" } else { "read" };
        out += &format!(
            "@group(0) @binding({}) var<storage, {access}> {name}: array<{ty}>;\n",
            j + 1
        );
    }
    if k.bufs.contains(&("w", "u32", false)) {
        out += WQ;
    }
    if let Some(w) = k.weight {
        let w = super::bodies::to_wgsl(w);
        out += &format!("fn weight(c: u32, t: u32) -> f32 {{ return {w}; }}\n");
    }
    out += "@compute @workgroup_size(64)\n";
    out += "fn main(@builtin(global_invocation_id) gid: vec3<u32>, \
            @builtin(num_workgroups) nwg: vec3<u32>) {\n    let i = flat(gid, nwg);";
    out += &super::bodies::to_wgsl(k.body);
    out += "}\n";
    Some(out)
}

/// Weights read in their stored format from a `u32` array `w` (each shader that uses it
/// declares `w`): `wq(fmt, base, t)` is element `t` of the row starting at byte `base`, with
/// its format code `fmt` one of the `F_*` constants (the format table's GPU codes; ggml's
/// block layouts with the reference dequantizers' arithmetic, `kernels/ggml.rs`). Halves
/// never straddle a word: every row and block starts at an even byte.
const WQ: &str = r#"
fn byte_at(b: u32) -> u32 { return (w[b >> 2u] >> ((b & 3u) * 8u)) & 255u; }
fn half_at(b: u32) -> u32 { return (w[b >> 2u] >> ((b & 2u) * 8u)) & 65535u; }
fn f16_k(h: u32) -> f32 { return unpack2x16float(h).x; }
fn qh5(b: u32, i: u32) -> u32 { return (byte_at(b + i / 8u) >> (i % 8u)) & 1u; }
fn nib(b: u32, j: u32) -> u32 {
    let v = byte_at(b + j % 16u);
    return select(v & 15u, v >> 4u, j >= 16u);
}
fn scale_min(sc: u32, j: u32) -> vec2<u32> {
    if (j < 4u) { return vec2<u32>(byte_at(sc + j) & 63u, byte_at(sc + 4u + j) & 63u); }
    let i = j - 4u;
    return vec2<u32>(
        (byte_at(sc + 8u + i) & 15u) | ((byte_at(sc + i) >> 2u) & 48u),
        (byte_at(sc + 8u + i) >> 4u) | ((byte_at(sc + 4u + i) >> 2u) & 48u));
}
fn wq(fmt: u32, base: u32, t: u32) -> f32 {
    switch fmt {
        case F_BF16: { return bitcast<f32>(half_at(base + 2u * t) << 16u); }
        case F_F16: { return f16_k(half_at(base + 2u * t)); }
        case F_Q8_0: {
            let bb = base + (t / 32u) * 34u;
            let q = i32(byte_at(bb + 2u + t % 32u) << 24u) >> 24u;
            return f32(q) * f16_k(half_at(bb));
        }
        case F_Q4_0: {
            let bb = base + (t / 32u) * 18u;
            return f16_k(half_at(bb)) * f32(i32(nib(bb + 2u, t % 32u)) - 8);
        }
        case F_Q4_1: {
            let bb = base + (t / 32u) * 20u;
            let q = nib(bb + 4u, t % 32u);
            return (f16_k(half_at(bb)) * f32(q)) + f16_k(half_at(bb + 2u));
        }
        case F_Q5_0: {
            let bb = base + (t / 32u) * 22u; let j = t % 32u;
            let q = nib(bb + 6u, j) | (qh5(bb + 2u, j) << 4u);
            return f16_k(half_at(bb)) * f32(i32(q) - 16);
        }
        case F_Q5_1: {
            let bb = base + (t / 32u) * 24u; let j = t % 32u;
            let q = nib(bb + 8u, j) | (qh5(bb + 4u, j) << 4u);
            return (f16_k(half_at(bb)) * f32(q)) + f16_k(half_at(bb + 2u));
        }
        case F_Q4_K, F_Q5_K: {
            // Q4_K (144 bytes) and Q5_K (176: a fifth bit per element in qh).
            let five = fmt == F_Q5_K;
            let bb = base + (t / 256u) * select(144u, 176u, five);
            let e = t % 256u; let j = e / 32u; let l = e % 32u;
            let qs = bb + select(16u, 48u, five);
            var q = (byte_at(qs + (j / 2u) * 32u + l) >> (4u * (j % 2u))) & 15u;
            if (five) { q = q | (((byte_at(bb + 16u + l) >> j) & 1u) << 4u); }
            let sm = scale_min(bb + 4u, j);
            let ds = f16_k(half_at(bb)) * f32(sm.x);
            let dm = f16_k(half_at(bb + 2u)) * f32(sm.y);
            return ds * f32(q) - dm;
        }
        default: {
            // F_Q6_K: ql[128], qh[64], scales[16] (i8), d.
            let bb = base + (t / 256u) * 210u;
            let e = t % 256u; let h = e / 128u; let r = e % 128u;
            let lo = (byte_at(bb + h * 64u + r % 64u) >> (4u * (r / 64u))) & 15u;
            let hi = (byte_at(bb + 128u + h * 32u + r % 32u) >> (2u * (r / 32u))) & 3u;
            let q = i32(lo | (hi << 4u)) - 32;
            let sc = i32(byte_at(bb + 192u + e / 16u) << 24u) >> 24u;
            let ds = f16_k(half_at(bb + 208u)) * f32(sc);
            return ds * f32(q);
        }
    }
}
"#;
