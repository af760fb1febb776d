//! The shaders over sequences and rows: attention (bidirectional and causal), the KV cache,
//! pooling, normalization, copies, convolution and DeBERTa's disentangled bias. Same
//! conventions as the parent module's; its `entry!` and `wq!` are in scope here.

/// `(name, body)` of each of these shaders.
pub(super) const SHADERS: &[(&str, &str)] = &[
    // Bidirectional attention scores of one sequence (parameters: `params::AttnScores`).
    // s[(h·len + i)·len + j] = (q_i · k_j)·scale + bias.
    (
        "attn_scores",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> bias: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> s: array<f32>;\n",
            entry!(),
            r#"
    let len = p.len; let heads = p.heads; let hd = p.hd;
    if (i >= heads * len * len) { return; }
    let h = i / (len * len); let qi = (i / len) % len; let kj = i % len;
    let hidden = heads * hd; let stride = 3u * hidden;
    let q = p.qo + qi * stride + h * hd;
    let k = p.qo + kj * stride + hidden + h * hd;
    var acc = 0.0;
    for (var t = 0u; t < hd; t++) { acc = fma(qkv[q + t], qkv[k + t], acc); }
    var v = acc * p.scale;
    switch p.kind {
        case 1u: { v += bias[h * (2u * p.max_len - 1u) + (p.max_len - 1u) + kj - qi]; }
        case 2u: { v += -(bias[h] * f32(max(qi, kj) - min(qi, kj))); }
        case 3u: { v += bias[p.bo + i]; }
        default: {}
    }
    s[i] = v;
}"#
        ),
    ),
    // Softmax of rows of scores in place; for causal attention (`p.causal`), row t of a chunk
    // at `pos0 + t / heads` holds keys j0..n (the last `window`, 0 = all).
    (
        "softmax",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p.rows) { return; }
    var n = p.width;
    if (p.causal != 0u) {
        let pos = p.pos0 + i / p.heads;
        let last = pos + 1u;
        var j0 = 0u;
        if (p.window != 0u && last > p.window) { j0 = last - p.window; }
        n = last - j0;
    }
    let base = p.xo + i * p.width;
    var m = x[base];
    for (var t = 1u; t < n; t++) { m = max(m, x[base + t]); }
    var sum = 0.0;
    for (var t = 0u; t < n; t++) { let e = exp(x[base + t] - m); x[base + t] = e; sum += e; }
    let inv = 1.0 / sum;
    for (var t = 0u; t < n; t++) { x[base + t] = x[base + t] * inv; }
}"#
        ),
    ),
    // Context of one sequence (`qo`: its first row in qkv, `oo`: in out).
    // out[i][h·hd + d] = Σ_j P[h][i][j] · v_j[h·hd + d], j in order.
    (
        "attn_context",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let len = p.len; let heads = p.heads; let hd = p.hd;
    let hidden = heads * hd;
    if (i >= len * hidden) { return; }
    let qi = i / hidden; let col = i % hidden; let h = col / hd;
    let stride = 3u * hidden;
    let srow = (h * len + qi) * len;
    var acc = 0.0;
    for (var j = 0u; j < len; j++) { acc = fma(s[srow + j], qkv[p.qo + j * stride + 2u * hidden + col], acc); }
    o[p.oo + qi * hidden + col] = acc;
}"#
        ),
    ),
    // Appends to the KV cache: keys transposed `[kv_dim, capacity]`, values `[capacity, kv_dim]`.
    (
        "kv_append",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> kc: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> vc: array<f32>;\n",
            entry!(),
            r#"
    let kv = p.kv_dim;
    if (i >= p.rows * kv) { return; }
    let r = i / kv; let c = i % kv;
    let row = p.qo + r * (p.q_dim + 2u * kv);
    let t = p.start + r;
    kc[p.ko + c * p.capacity + t] = qkv[row + p.q_dim + c];
    vc[p.vo + t * kv + c] = qkv[row + p.q_dim + kv + c];
}"#
        ),
    ),
    // Causal scores of a chunk of `cr` query rows at positions pos0 + r (window 0: none,
    // softcap 0: none, span: the most keys a row reads). Row (r, h) of the scratch holds keys
    // j0..=pos at columns 0.. (capacity apart).
    (
        "causal_scores",
        concat!(
            "@group(0) @binding(1) var<storage, read> q: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> keys: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> s: array<f32>;\n",
            entry!(),
            r#"
    let heads = p.heads; let hd = p.hd; let span = p.span;
    if (i >= p.cr * heads * span) { return; }
    let rh = i / span; let jj = i % span;
    let r = rh / heads; let h = rh % heads;
    let last = p.pos0 + r + 1u;
    var j0 = 0u;
    if (p.window != 0u && last > p.window) { j0 = last - p.window; }
    let j = j0 + jj;
    if (j >= last) { return; }
    let g = h / p.kv_group;
    let qb = p.qo + r * p.q_stride + h * hd;
    let kb = p.ko + g * hd * p.capacity + j;
    var acc = 0.0;
    for (var t = 0u; t < hd; t++) { acc = fma(q[qb + t], keys[kb + t * p.capacity], acc); }
    var v = acc * p.scale;
    if (p.softcap != 0.0) { let cap = p.softcap; v = tanh_k(v / cap) * cap; }
    s[p.so + rh * p.capacity + jj] = v;
}"#
        ),
    ),
    // Causal context of a chunk:
    // out[r][h·hd + d] = Σ_j P[r, h][j] · values[j0 + j][g·hd + d].
    (
        "causal_context",
        concat!(
            "@group(0) @binding(1) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> vals: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let heads = p.heads; let hd = p.hd; let qd = heads * hd;
    if (i >= p.cr * qd) { return; }
    let r = i / qd; let col = i % qd; let h = col / hd; let d = col % hd;
    let g = h / p.kv_group;
    let last = p.pos0 + r + 1u;
    var j0 = 0u;
    if (p.window != 0u && last > p.window) { j0 = last - p.window; }
    let srow = p.so + (r * heads + h) * p.capacity;
    var acc = 0.0;
    for (var j = j0; j < last; j++) { acc = fma(s[srow + j - j0], vals[p.vo + j * p.kv_dim + g * hd + d], acc); }
    o[p.oo + i] = acc;
}"#
        ),
    ),
    // One sequence, one mode (0 cls, 1 last, 2 max, 3 mean, 4 mean/sqrt(len), 5 weighted mean).
    (
        "pool",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let hidden = p.hidden; let len = p.len;
    if (i >= hidden) { return; }
    let base = p.xo + p.start * hidden + i;
    var v = 0.0;
    switch p.mode {
        case 0u: { v = x[base]; }
        case 1u: { v = x[base + (len - 1u) * hidden]; }
        case 2u: {
            v = x[base];
            for (var r = 1u; r < len; r++) { v = max(v, x[base + r * hidden]); }
        }
        case 5u: {
            for (var r = 0u; r < len; r++) { v = fma(x[base + r * hidden], f32(r + 1u), v); }
            v = v / f32(len * (len + 1u) / 2u);
        }
        default: {
            for (var r = 0u; r < len; r++) { v += x[base + r * hidden]; }
            v = v / select(f32(len), sqrt(f32(len)), p.mode == 4u);
        }
    }
    o[p.oo + i] = v;
}"#
        ),
    ),
    // L2 normalization per row (torch's `normalize`, eps 1e-12).
    (
        "normalize",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p.rows) { return; }
    let base = p.xo + i * p.width;
    var ss = 0.0;
    for (var t = 0u; t < p.width; t++) { ss = fma(x[base + t], x[base + t], ss); }
    let n = max(sqrt(ss), 1e-12);
    for (var t = 0u; t < p.width; t++) { x[base + t] = x[base + t] / n; }
}"#
        ),
    ),
    // Strided copy:
    // `o[r][c] = x[r][c]` (narrow), or with transpose `o[c][r] = x[r][c]`.
    (
        "copy2d",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let cols = p.cols;
    if (i >= p.rows * cols) { return; }
    let r = i / cols; let c = i % cols;
    let v = x[p.xo + r * p.src_stride + c];
    if (p.transpose != 0u) { o[p.oo + c * p.rows + r] = v; } else { o[p.oo + r * p.dst_stride + c] = v; }
}"#
        ),
    ),
    // `x[r][c] = fma(s[r], y[r][c], x[r][c])`.
    (
        "row_axpy",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> y: array<f32>;\n",
            entry!(),
            r#"
    let w = p.width;
    if (i >= p.rows * w) { return; }
    let r = i / w;
    x[p.xo + i] = fma(s[p.so + r], y[p.yo + i], x[p.xo + i]);
}"#
        ),
    ),
    // Divides columns col0..col0 + width of each row by s.
    (
        "divide_columns",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    let w = p.width;
    if (i >= p.rows * w) { return; }
    let at = p.xo + (i / w) * p.stride + p.col0 + i % w;
    x[at] = x[at] / p.s;
}"#
        ),
    ),
    // One sequence, one group g of a grouped convolution: same padding inside the sequence; weight `[og, kernel·cg]` columns (tap, channel).
    (
        "conv1d",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> b: array<f32>;\n",
            "@group(0) @binding(4) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let len = p.len; let kernel = p.kernel; let cg = p.cg; let og = p.og;
    if (i >= len * og) { return; }
    let t = i / og; let j = i % og;
    let pad = (kernel - 1u) / 2u;
    var acc = 0.0;
    for (var tap = 0u; tap < kernel; tap++) {
        let src = i32(t) + i32(tap) - i32(pad);
        if (src >= 0 && u32(src) < len) {
            let xr = p.xo + (p.start + u32(src)) * p.channels + p.g * cg;
            let wr = j * kernel * cg + tap * cg;
            for (var c = 0u; c < cg; c++) { acc = fma(w[wr + c], x[xr + c], acc); }
        }
    }
    o[p.oo + (p.start + t) * p.width + p.g * og + j] = acc + b[p.g * og + j];
}"#
        ),
    ),
    // DeBERTa's disentangled bias of one sequence: bias[(h·len + i)·len + j] =
    // q_i · pos_key[r] + k_j · pos_query[r] with r = index[(i − j) + max_len − 1].
    (
        "disentangled",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> pk: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> pq: array<f32>;\n",
            "@group(0) @binding(4) var<storage, read> idx: array<u32>;\n",
            "@group(0) @binding(5) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let len = p.len; let heads = p.heads; let hd = p.hd;
    if (i >= heads * len * len) { return; }
    let h = i / (len * len); let qi = (i / len) % len; let kj = i % len;
    let hidden = heads * hd; let stride = 3u * hidden;
    let r = idx[qi + p.max_len - 1u - kj];
    let tb = r * hidden + h * hd;
    var v = 0.0;
    if (p.has_c2p != 0u) {
        let q = p.qo + (p.start + qi) * stride + h * hd;
        var acc = 0.0;
        for (var t = 0u; t < hd; t++) { acc = fma(qkv[q + t], pk[tb + t], acc); }
        if (p.divide != 0u) { acc = acc / p.divide_by; }
        v = acc;
    }
    if (p.has_p2c != 0u) {
        let k = p.qo + (p.start + kj) * stride + hidden + h * hd;
        var acc = 0.0;
        for (var t = 0u; t < hd; t++) { acc = fma(qkv[k + t], pq[tb + t], acc); }
        if (p.divide != 0u) { acc = acc / p.divide_by; }
        v = v + acc;
    }
    o[p.oo + i] = v;
}"#
        ),
    ),
];
