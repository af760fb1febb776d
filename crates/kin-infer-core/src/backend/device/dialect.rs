//! The one language the GPU kernels are written in (`bodies.rs`, and the helpers here), and
//! its two renderings: CUDA C ([`to_cuda`]) and WGSL ([`to_wgsl`]).
//!
//! The dialect is the part of C that WGSL also reads after a mechanical rewrite: declarations
//! `u32 x = e;`, `f32 x;`, `f32 x[4];`, `bool b = e;` (one per statement; in WGSL
//! `var x: u32 = e;`, `var x: array<f32, 4>;`), functions `f32 name(f32 a, u32 b) {` (WGSL:
//! `fn name(a: f32, b: u32) -> f32 {`), conversions written as calls (`f32(n)`, `u32(s)`,
//! `i32(t)`, `bitcast_f32(u)`), float literals with `f` (`1.0f`), `select(if_false, if_true,
//! cond)` for a conditional value, braces on every `if`/`for` and case (a case ends in `break;`
//! or `return`), and the functions both languages have (`fma`, `exp`, `sqrt`, `abs`, `max`,
//! `min`; `mul_rn`/`add_rn`/`sub_rn`, products and sums never fused into an fma). The helpers
//! that read a stored weight take the `u32` buffer as `const u32* w` (WGSL: the global `w`).
//! Each language's prelude (`wgsl.rs`, `cuda_kernels.rs`) gives these names their meaning.

/// The helpers that read the `u32` buffer `w` (their first parameter in C).
#[cfg(feature = "wgpu")]
const W_FNS: [&str; 8] = [
    "byte_at", "half_at", "qh5", "nib", "scale_k", "min_k", "k45", "wq",
];

const TYPES: [&str; 4] = ["u32", "f32", "i32", "bool"];

/// `(return type, name, parameters)` of a line that opens a function, `T name(T a, ...) {`.
fn header(line: &str) -> Option<(&str, &str, &str)> {
    let t = line.trim_start();
    let (ty, rest) = t.split_once(' ')?;
    let (name, rest) = rest.split_once('(')?;
    let params = rest.strip_suffix(") {")?;
    let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    (TYPES.contains(&ty) && is_name).then_some((ty, name, params))
}

#[cfg(feature = "cuda")]
/// Dialect source as CUDA C: functions marked `__device__` (the rest is C under the CUDA
/// prelude's typedefs and defines).
pub(crate) fn to_cuda(src: &str) -> String {
    src.lines()
        .map(|l| match header(l) {
            Some(_) => format!("__device__ {l}\n"),
            None => format!("{l}\n"),
        })
        .collect()
}

#[cfg(feature = "wgpu")]
/// Dialect source as WGSL: function headers and declarations rewritten, the buffer argument
/// of the `w` helpers dropped (WGSL's read the global `w`), `bitcast_f32(` as `bitcast<f32>(`.
pub(crate) fn to_wgsl(src: &str) -> String {
    let mut src = src.replace("bitcast_f32(", "bitcast<f32>(");
    for f in W_FNS {
        src = src
            .replace(&format!("{f}(const u32* w, "), &format!("{f}("))
            .replace(&format!("{f}(w, "), &format!("{f}("));
    }
    src.lines()
        .map(|l| match header(l) {
            Some((ty, name, params)) => {
                let params: Vec<String> = params
                    .split(", ")
                    .filter_map(|p| p.split_once(' ').map(|(t, n)| format!("{n}: {t}")))
                    .collect();
                format!("fn {name}({}) -> {ty} {{\n", params.join(", "))
            }
            None => declarations(l) + "\n",
        })
        .collect()
}

#[cfg(feature = "wgpu")]
/// One line with its declarations in WGSL form (`T x` → `var x: T`, `T x[N]` →
/// `var x: array<T, N>`); a conversion (`f32(`) or a name ending in a type's letters is not one.
fn declarations(src: &str) -> String {
    let mut out = String::with_capacity(src.len() + src.len() / 4);
    let b = src.as_bytes();
    let mut at = 0;
    while at < b.len() {
        let word_start = at == 0 || !(b[at - 1].is_ascii_alphanumeric() || b[at - 1] == b'_');
        let ty = TYPES
            .into_iter()
            .find(|t| src[at..].starts_with(t) && src[at + t.len()..].starts_with(' '));
        match ty {
            Some(ty) if word_start => {
                let name_start = at + ty.len() + 1;
                let name_len = src[name_start..]
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(src.len() - name_start);
                let name_end = name_start + name_len;
                let name = &src[name_start..name_end];
                if src[name_end..].starts_with('[') {
                    let close = name_end + src[name_end..].find(']').expect("an array length");
                    let len = &src[name_end + 1..close];
                    out.push_str(&format!("var {name}: array<{ty}, {len}>"));
                    at = close + 1;
                } else {
                    out.push_str(&format!("var {name}: {ty}"));
                    at = name_end;
                }
            }
            _ => {
                let ch = src[at..].chars().next().expect("in bounds");
                out.push(ch);
                at += ch.len_utf8();
            }
        }
    }
    out
}

/// The helpers every kernel may call: tanh and erf with the CPU's polynomials
/// (`kernels::math`, whose constants each prelude defines), so both backends approximate them
/// as the CPU does (WGSL has no erf; its tanh's accuracy is the platform's); the activations;
/// and `wq(w, fmt, base, t)`, element `t` of the row starting at byte `base` of `w` in format
/// `fmt` (one of the `F_*` codes: ggml's block layouts with the reference dequantizers'
/// arithmetic, `kernels/ggml.rs`). Halves never straddle a word: every row and block starts
/// at an even byte.
pub(crate) const HELPERS: &str = r#"
f32 tanh_k(f32 x) {
    f32 s = abs(x);
    if (s > TANH_SPLIT) {
        f32 e = exp(min(s + s, 88.0f));
        f32 big = 1.0f - 2.0f / (e + 1.0f);
        return select(big, -big, x < 0.0f);
    }
    f32 z = x * x;
    f32 q = TANH_P0;
    q = fma(q, z, TANH_P1);
    q = fma(q, z, TANH_P2);
    q = fma(q, z, TANH_P3);
    q = fma(q, z, TANH_P4);
    return fma(q * z, x, x);
}
f32 erf_k(f32 a) {
    f32 t = abs(a);
    f32 s = a * a;
    if (t > ERF_SPLIT) {
        f32 r = fma(ERF_B0, t, ERF_B1);
        f32 u = fma(ERF_B2, t, ERF_B3);
        r = fma(r, s, u);
        r = fma(r, t, ERF_B4);
        r = fma(r, t, ERF_B5);
        r = fma(r, t, ERF_B6);
        r = fma(r, t, -t);
        f32 v = 1.0f - exp(r);
        return select(v, -v, a < 0.0f);
    }
    f32 q = ERF_S0;
    q = fma(q, s, ERF_S1);
    q = fma(q, s, ERF_S2);
    q = fma(q, s, ERF_S3);
    q = fma(q, s, ERF_S4);
    q = fma(q, s, ERF_S5);
    return fma(q, a, a);
}
f32 act_k(f32 x, u32 act) {
    switch (act) {
        case 0u: { return x / (1.0f + exp(min(-x, 88.0f))); }
        case 1u: { return (0.5f * x) * (1.0f + erf_k(x * 0.70710677f)); }
        case 2u: {
            f32 u = fma(0.044715f * x * x, x, x);
            return (0.5f * x) * (1.0f + tanh_k(0.7978846f * u));
        }
        case 3u: { return max(x, 0.0f); }
        default: { return tanh_k(x); }
    }
}
"#;

/// The stored-weight readers (in a kernel that binds `u32` weights `w`).
pub(crate) const WQ: &str = r#"
u32 byte_at(const u32* w, u32 b) {
    return (w[b >> 2u] >> ((b & 3u) * 8u)) & 255u;
}
u32 half_at(const u32* w, u32 b) {
    return (w[b >> 2u] >> ((b & 2u) * 8u)) & 65535u;
}
f32 f16_k(u32 h) {
    u32 s = (h & 0x8000u) << 16u;
    u32 e = (h >> 10u) & 31u;
    u32 m = h & 1023u;
    if (e == 0u) { f32 v = f32(m) * 5.9604645e-8f; return select(v, -v, s != 0u); }
    if (e == 31u) { return bitcast_f32(s | 0x7f800000u | (m << 13u)); }
    return bitcast_f32(s | ((e + 112u) << 23u) | (m << 13u));
}
u32 qh5(const u32* w, u32 b, u32 i) {
    return (byte_at(w, b + i / 8u) >> (i % 8u)) & 1u;
}
u32 nib(const u32* w, u32 b, u32 j) {
    u32 v = byte_at(w, b + j % 16u);
    return select(v & 15u, v >> 4u, j >= 16u);
}
u32 scale_k(const u32* w, u32 sc, u32 j) {
    if (j < 4u) { return byte_at(w, sc + j) & 63u; }
    return (byte_at(w, sc + 4u + j) & 15u) | ((byte_at(w, sc + j - 4u) >> 2u) & 48u);
}
u32 min_k(const u32* w, u32 sc, u32 j) {
    if (j < 4u) { return byte_at(w, sc + 4u + j) & 63u; }
    return (byte_at(w, sc + 4u + j) >> 4u) | ((byte_at(w, sc + j) >> 2u) & 48u);
}
f32 k45(const u32* w, bool five, u32 base, u32 t) {
    u32 bb = base + (t / 256u) * select(144u, 176u, five);
    u32 e = t % 256u;
    u32 j = e / 32u;
    u32 l = e % 32u;
    u32 qs = bb + select(16u, 48u, five);
    u32 q = (byte_at(w, qs + (j / 2u) * 32u + l) >> (4u * (j % 2u))) & 15u;
    if (five) { q = q | (((byte_at(w, bb + 16u + l) >> j) & 1u) << 4u); }
    f32 ds = mul_rn(f16_k(half_at(w, bb)), f32(scale_k(w, bb + 4u, j)));
    f32 dm = mul_rn(f16_k(half_at(w, bb + 2u)), f32(min_k(w, bb + 4u, j)));
    return sub_rn(mul_rn(ds, f32(q)), dm);
}
f32 wq(const u32* w, u32 fmt, u32 base, u32 t) {
    switch (fmt) {
        case F_BF16: { return bitcast_f32(half_at(w, base + 2u * t) << 16u); }
        case F_F16: { return f16_k(half_at(w, base + 2u * t)); }
        case F_Q8_0: {
            u32 bb = base + (t / 32u) * 34u;
            i32 q = i32(byte_at(w, bb + 2u + t % 32u) << 24u) >> 24u;
            return mul_rn(f32(q), f16_k(half_at(w, bb)));
        }
        case F_Q4_0: {
            u32 bb = base + (t / 32u) * 18u;
            return mul_rn(f16_k(half_at(w, bb)), f32(i32(nib(w, bb + 2u, t % 32u)) - 8));
        }
        case F_Q4_1: {
            u32 bb = base + (t / 32u) * 20u;
            u32 q = nib(w, bb + 4u, t % 32u);
            return add_rn(mul_rn(f16_k(half_at(w, bb)), f32(q)), f16_k(half_at(w, bb + 2u)));
        }
        case F_Q5_0: {
            u32 bb = base + (t / 32u) * 22u;
            u32 j = t % 32u;
            u32 q = nib(w, bb + 6u, j) | (qh5(w, bb + 2u, j) << 4u);
            return mul_rn(f16_k(half_at(w, bb)), f32(i32(q) - 16));
        }
        case F_Q5_1: {
            u32 bb = base + (t / 32u) * 24u;
            u32 j = t % 32u;
            u32 q = nib(w, bb + 8u, j) | (qh5(w, bb + 4u, j) << 4u);
            return add_rn(mul_rn(f16_k(half_at(w, bb)), f32(q)), f16_k(half_at(w, bb + 2u)));
        }
        case F_Q4_K: { return k45(w, false, base, t); }
        case F_Q5_K: { return k45(w, true, base, t); }
        default: {
            // F_Q6_K: ql[128], qh[64], scales[16] (i8), d.
            u32 bb = base + (t / 256u) * 210u;
            u32 e = t % 256u;
            u32 h = e / 128u;
            u32 r = e % 128u;
            u32 lo = (byte_at(w, bb + h * 64u + r % 64u) >> (4u * (r / 64u))) & 15u;
            u32 hi = (byte_at(w, bb + 128u + h * 32u + r % 32u) >> (2u * (r / 32u))) & 3u;
            i32 q = i32(lo | (hi << 4u)) - 32;
            i32 sc = i32(byte_at(w, bb + 192u + e / 16u) << 24u) >> 24u;
            f32 ds = mul_rn(f16_k(half_at(w, bb + 208u)), f32(sc));
            return mul_rn(ds, f32(q));
        }
    }
}
"#;

#[cfg(all(test, any(feature = "wgpu", feature = "cuda")))]
mod tests {
    #[allow(unused_imports)] // each test is behind its backend's feature
    use super::*;

    #[cfg(feature = "wgpu")]
    #[test]
    fn declarations_and_headers_become_wgsl() {
        let got = to_wgsl("u32 n = p.rows; f32 acc[16]; for (u32 t = 0u; t < n; t++) { f32 x1; }");
        assert_eq!(
            got,
            "var n: u32 = p.rows; var acc: array<f32, 16>; \
             for (var t: u32 = 0u; t < n; t++) { var x1: f32; }\n"
        );
        // A conversion (no space) and a name ending in a type's letters are left alone.
        assert_eq!(to_wgsl("f32(n) + xu32 q"), "f32(n) + xu32 q\n");
        assert_eq!(to_wgsl("wq(w, p.fmt, b, t)"), "wq(p.fmt, b, t)\n");
        assert_eq!(
            to_wgsl("f32 k45(const u32* w, bool five, u32 base) {"),
            "fn k45(five: bool, base: u32) -> f32 {\n"
        );
    }

    #[cfg(feature = "cuda")]
    #[test]
    fn headers_become_cuda_device_functions() {
        let got = to_cuda("f32 act_k(f32 x, u32 act) {\n    f32 v = x;");
        assert_eq!(
            got,
            "__device__ f32 act_k(f32 x, u32 act) {\n    f32 v = x;\n"
        );
    }
}
