//! The wgpu backend's WGSL compute shaders, one per operation.
//!
//! Conventions (every shader): binding 0 is the op's parameters, a struct `p` generated from
//! its description in `params.rs` (fields read by name: `p.rows`), bindings 1.. the tensors in the order the Rust side passes them; every binding
//! is read by the shader (the pipelines' layouts are derived from what each entry point uses).
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
/// codes, its parameter struct (`params.rs`), [`PRELUDE`] and its body.
pub(super) fn source(op: &str, body: &str) -> String {
    let consts: String = super::math_constants()
        .iter()
        .map(|(name, v)| format!("const {name}: f32 = {v:e};\n"))
        .collect();
    let codes: String = super::params::format_codes()
        .iter()
        .map(|(name, c)| format!("const {name}: u32 = {c}u;\n"))
        .collect();
    let params = super::params::wgsl_struct(op);
    format!("{consts}{codes}{params}{PRELUDE}{body}")
}

/// The entry point's signature, shared by every shader.
macro_rules! entry {
    () => {
        "@compute @workgroup_size(64)\nfn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {\n    let i = flat(gid, nwg);\n"
    };
}

/// Weights read in their stored format from a `u32` array `w` (each shader that uses it
/// declares `w`): `wq(fmt, base, t)` is element `t` of the row starting at byte `base`, with
/// its format code `fmt` one of the `F_*` constants (the format table's GPU codes; ggml's
/// block layouts with the reference dequantizers' arithmetic, `kernels/ggml.rs`). Halves
/// never straddle a word: every row and block starts at an even byte.
macro_rules! wq {
    () => {
        r#"
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
"#
    };
}

/// The body of `linear` and `linear_q` over the shader's own `weight(column, t)`: a 4 × 4
/// output tile per invocation (see `linear`).
macro_rules! tile4 {
    () => {
        concat!(
            entry!(),
            r#"
    let rows = p.rows; let k = p.k; let gn = p.gn;
    let ct = (gn + 3u) / 4u;
    if (i >= ((rows + 3u) / 4u) * ct) { return; }
    let r0 = (i / ct) * 4u; let c0 = (i % ct) * 4u;
    var acc: array<f32, 16>;
    for (var t = 0u; t < k; t++) {
        var xv: array<f32, 4>;
        var wv: array<f32, 4>;
        for (var a = 0u; a < 4u; a++) {
            xv[a] = x[p.xo + min(r0 + a, rows - 1u) * k + t];
            wv[a] = weight(min(c0 + a, gn - 1u), t);
        }
        for (var a = 0u; a < 4u; a++) {
            for (var c = 0u; c < 4u; c++) { acc[a * 4u + c] = fma(xv[a], wv[c], acc[a * 4u + c]); }
        }
    }
    for (var a = 0u; a < 4u; a++) {
        for (var c = 0u; c < 4u; c++) {
            if (r0 + a < rows && c0 + c < gn) {
                var v = acc[a * 4u + c];
                if (p.has_bias != 0u) { v += b[p.bo + p.j0 + c0 + c]; }
                o[p.oo + (r0 + a) * p.ntot + p.j0 + c0 + c] = v;
            }
        }
    }
}"#
        )
    };
}

mod seq;

/// The body of shader `op`, if there is one.
pub(super) fn shader(op: &str) -> Option<&'static str> {
    SHADERS
        .iter()
        .chain(seq::SHADERS)
        .find(|(name, _)| *name == op)
        .map(|(_, b)| *b)
}

/// `(name, body)` of the matrix, normalization, elementwise, gather and rope shaders (the
/// rest are `seq.rs`'s).
const SHADERS: &[(&str, &str)] = &[
    // `o[r][j0 + c] = x[r] · w[c] + b[j0 + c]` for one column group of `gn` outputs (weights `[gn, k]`, torch's layout). One invocation
    // computes a 4 × 4 tile (4 rows, 4 columns): each input and weight read once serves four
    // products. Every element is still its own fma chain over k from 0, so the tiling changes
    // no bit (nor does a row's tile partners: rows past `rows` read a clamped row, unused).
    (
        "linear",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> b: array<f32>;\n",
            "@group(0) @binding(4) var<storage, read_write> o: array<f32>;\n",
            "fn weight(c: u32, t: u32) -> f32 { return w[c * p.k + t]; }\n",
            tile4!(),
        ),
    ),
    // [`linear`] over weights in a stored format (`p.fmt`, rows `p.row_bytes` apart).
    (
        "linear_q",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<u32>;\n",
            "@group(0) @binding(3) var<storage, read> b: array<f32>;\n",
            "@group(0) @binding(4) var<storage, read_write> o: array<f32>;\n",
            wq!(),
            "fn weight(c: u32, t: u32) -> f32 { return wq(p.fmt, c * p.row_bytes, t); }\n",
            tile4!(),
        ),
    ),
    // Rows `ids[r]` of a weight in a stored format, as f32.
    (
        "gather_q",
        concat!(
            "@group(0) @binding(1) var<storage, read> w: array<u32>;\n",
            "@group(0) @binding(2) var<storage, read> ids: array<u32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            wq!(),
            entry!(),
            r#"
    let k = p.k;
    if (i >= p.rows * k) { return; }
    let r = i / k; let t = i % k;
    o[p.oo + i] = wq(p.fmt, ids[r] * p.row_bytes, t);
}"#
        ),
    ),
    // `o[i][j] = Σ_t a[i][t] · b[t][j]`.
    (
        "matmul",
        concat!(
            "@group(0) @binding(1) var<storage, read> a: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> b: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let m = p.m; let k = p.k; let n = p.n;
    if (i >= m * n) { return; }
    let r = i / n; let c = i % n;
    var acc = 0.0;
    for (var t = 0u; t < k; t++) { acc = fma(a[p.ao + r * p.lda + t], b[p.bo + t * p.ldb + c], acc); }
    o[p.oo + r * n + c] = acc;
}"#
        ),
    ),
    // Layer norm in place. One invocation per row: torch's biased variance.
    (
        "layer_norm",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> b: array<f32>;\n",
            entry!(),
            r#"
    let n = p.width;
    if (i >= p.rows) { return; }
    let base = p.xo + i * n;
    var sum = 0.0;
    for (var t = 0u; t < n; t++) { sum += x[base + t]; }
    let mean = sum / f32(n);
    var ss = 0.0;
    for (var t = 0u; t < n; t++) { let d = x[base + t] - mean; ss = fma(d, d, ss); }
    let inv = 1.0 / sqrt(ss / f32(n) + p.eps);
    for (var t = 0u; t < n; t++) { x[base + t] = fma((x[base + t] - mean) * inv, w[t], b[t]); }
}"#
        ),
    ),
    // RMS norm, one invocation per row.
    (
        "rms_norm",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let n = p.width;
    if (i >= p.rows) { return; }
    let xb = p.xo + i * n; let ob = p.oo + i * n;
    var ss = 0.0;
    for (var t = 0u; t < n; t++) { ss = fma(x[xb + t], x[xb + t], ss); }
    let inv = 1.0 / sqrt(ss / f32(n) + p.eps);
    for (var t = 0u; t < n; t++) { o[ob + t] = w[t] * (x[xb + t] * inv); }
}"#
        ),
    ),
    // Elementwise in place: op 0..4 an activation (act_k), 5 scale by s,
    // 6 softcap at s.
    (
        "unary",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p.len) { return; }
    let v = x[p.xo + i];
    var y: f32;
    switch p.op {
        case 5u: { y = v * p.s; }
        case 6u: { y = tanh_k(v / p.s) * p.s; }
        default: { y = act_k(v, p.op); }
    }
    x[p.xo + i] = y;
}"#
        ),
    ),
    // `x op= y`: 0 add, 1 mul.
    (
        "binary",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> y: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p.len) { return; }
    let a = x[p.xo + i]; let b = y[p.yo + i];
    x[p.xo + i] = select(a + b, a * b, p.op == 1u);
}"#
        ),
    ),
    // `o[r][j] = act(gate) · up` of `[gate | up]` rows.
    (
        "glu",
        concat!(
            "@group(0) @binding(1) var<storage, read> g: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let w = p.width;
    if (i >= p.rows * w) { return; }
    let r = i / w; let j = i % w;
    let base = p.go + r * 2u * w;
    o[p.oo + i] = act_k(g[base + j], p.act) * g[base + w + j];
}"#
        ),
    ),
    // Row r of o (=|+=) row ids[r] of the table.
    (
        "gather",
        concat!(
            "@group(0) @binding(1) var<storage, read> t: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> ids: array<u32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let w = p.width;
    if (i >= p.rows * w) { return; }
    let r = i / w; let c = i % w;
    let v = t[ids[r] * w + c];
    let at = p.oo + i;
    o[at] = select(v, o[at] + v, p.add != 0u);
}"#
        ),
    ),
    // Rotary embedding in place. cs: per row `[cos (dim/2) |
    // sin (dim/2)]`. One invocation per rotated pair.
    (
        "rope",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> cs: array<f32>;\n",
            entry!(),
            r#"
    let hd = p.head_dim; let hh = p.dim / 2u;
    let heads = p.width / hd;
    if (i >= p.rows * heads * hh) { return; }
    let r = i / (heads * hh);
    let h = (i / hh) % heads;
    let k = i % hh;
    let c = cs[r * 2u * hh + k]; let s = cs[r * 2u * hh + hh + k];
    let base = p.xo + r * p.stride + h * hd;
    var a: u32; var b: u32;
    if (p.interleaved != 0u) { a = base + 2u * k; b = a + 1u; } else { a = base + k; b = base + hh + k; }
    let x1 = x[a]; let x2 = x[b];
    x[a] = x1 * c - x2 * s;
    x[b] = x2 * c + x1 * s;
}"#
        ),
    ),
];
