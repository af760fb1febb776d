//! The shaders over sequences and rows: attention (bidirectional and causal), the KV cache,
//! pooling, normalization, copies, convolution and DeBERTa's disentangled bias. Same
//! conventions as the parent module's; its `entry!` and `wq!` are in scope here.

/// `(name, body)` of each of these shaders.
pub(super) const SHADERS: &[(&str, &str)] = &[
    // Bidirectional attention scores of one sequence: p: len, heads, hd, qo (first row of the
    // sequence in qkv), scale, kind (0 none, 1 relative, 2 alibi, 3 dense), max_len, bo.
    // s[(h·len + i)·len + j] = (q_i · k_j)·scale + bias.
    (
        "attn_scores",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> bias: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> s: array<f32>;\n",
            entry!(),
            r#"
    let len = p[0]; let heads = p[1]; let hd = p[2];
    if (i >= heads * len * len) { return; }
    let h = i / (len * len); let qi = (i / len) % len; let kj = i % len;
    let hidden = heads * hd; let stride = 3u * hidden;
    let q = p[3] + qi * stride + h * hd;
    let k = p[3] + kj * stride + hidden + h * hd;
    var acc = 0.0;
    for (var t = 0u; t < hd; t++) { acc = fma(qkv[q + t], qkv[k + t], acc); }
    var v = acc * pf(4);
    switch p[5] {
        case 1u: { v += bias[h * (2u * p[6] - 1u) + (p[6] - 1u) + kj - qi]; }
        case 2u: { v += -(bias[h] * f32(max(qi, kj) - min(qi, kj))); }
        case 3u: { v += bias[p[7] + i]; }
        default: {}
    }
    s[i] = v;
}"#
        ),
    ),
    // Softmax of rows of scores in place: p: rows, width, xo; or, for causal attention
    // (p[3] = 1), row t of a chunk at `start + c0 + t / heads` holds keys j0..n: p[4] heads,
    // p[5] first position, p[6] window (0 = none).
    (
        "softmax",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p[0]) { return; }
    var n = p[1];
    if (p[3] != 0u) {
        let pos = p[5] + i / p[4];
        let last = pos + 1u;
        var j0 = 0u;
        if (p[6] != 0u && last > p[6]) { j0 = last - p[6]; }
        n = last - j0;
    }
    let base = p[2] + i * p[1];
    var m = x[base];
    for (var t = 1u; t < n; t++) { m = max(m, x[base + t]); }
    var sum = 0.0;
    for (var t = 0u; t < n; t++) { let e = exp(x[base + t] - m); x[base + t] = e; sum += e; }
    let inv = 1.0 / sum;
    for (var t = 0u; t < n; t++) { x[base + t] = x[base + t] * inv; }
}"#
        ),
    ),
    // Context of one sequence: p: len, heads, hd, qo (first row in qkv), oo (first row in out).
    // out[i][h·hd + d] = Σ_j P[h][i][j] · v_j[h·hd + d], j in order.
    (
        "attn_context",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let len = p[0]; let heads = p[1]; let hd = p[2];
    let hidden = heads * hd;
    if (i >= len * hidden) { return; }
    let qi = i / hidden; let col = i % hidden; let h = col / hd;
    let stride = 3u * hidden;
    let srow = (h * len + qi) * len;
    var acc = 0.0;
    for (var j = 0u; j < len; j++) { acc = fma(s[srow + j], qkv[p[3] + j * stride + 2u * hidden + col], acc); }
    o[p[4] + qi * hidden + col] = acc;
}"#
        ),
    ),
    // p: rows, q_dim, kv_dim, start, capacity, qo, ko, vo. Keys transposed `[kv_dim, capacity]`.
    (
        "kv_append",
        concat!(
            "@group(0) @binding(1) var<storage, read> qkv: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> kc: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> vc: array<f32>;\n",
            entry!(),
            r#"
    let kv = p[2];
    if (i >= p[0] * kv) { return; }
    let r = i / kv; let c = i % kv;
    let row = p[5] + r * (p[1] + 2u * kv);
    let t = p[3] + r;
    kc[p[6] + c * p[4] + t] = qkv[row + p[1] + c];
    vc[p[7] + t * kv + c] = qkv[row + p[1] + kv + c];
}"#
        ),
    ),
    // Causal scores of a chunk of `cr` query rows at positions start + c0 + r: p: cr, heads,
    // hd, group, q_stride, qo, ko, capacity, pos0 (start + c0), window (0 none), scale,
    // softcap (0 none), span (max keys per row), so. Row (r, h) of the scratch holds keys
    // j0..=pos at columns 0.. (capacity apart).
    (
        "causal_scores",
        concat!(
            "@group(0) @binding(1) var<storage, read> q: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> keys: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> s: array<f32>;\n",
            entry!(),
            r#"
    let heads = p[1]; let hd = p[2]; let span = p[12];
    if (i >= p[0] * heads * span) { return; }
    let rh = i / span; let jj = i % span;
    let r = rh / heads; let h = rh % heads;
    let last = p[8] + r + 1u;
    var j0 = 0u;
    if (p[9] != 0u && last > p[9]) { j0 = last - p[9]; }
    let j = j0 + jj;
    if (j >= last) { return; }
    let g = h / p[3];
    let qb = p[5] + r * p[4] + h * hd;
    let kb = p[6] + g * hd * p[7] + j;
    var acc = 0.0;
    for (var t = 0u; t < hd; t++) { acc = fma(q[qb + t], keys[kb + t * p[7]], acc); }
    var v = acc * pf(10);
    if (p[11] != 0u) { let cap = pf(11); v = tanh_k(v / cap) * cap; }
    s[p[13] + rh * p[7] + jj] = v;
}"#
        ),
    ),
    // p: cr, heads, hd, group, kv_dim, vo, capacity, pos0, window, so, oo.
    // out[r][h·hd + d] = Σ_j P[r, h][j] · values[j0 + j][g·hd + d].
    (
        "causal_context",
        concat!(
            "@group(0) @binding(1) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> vals: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let heads = p[1]; let hd = p[2]; let qd = heads * hd;
    if (i >= p[0] * qd) { return; }
    let r = i / qd; let col = i % qd; let h = col / hd; let d = col % hd;
    let g = h / p[3];
    let last = p[7] + r + 1u;
    var j0 = 0u;
    if (p[8] != 0u && last > p[8]) { j0 = last - p[8]; }
    let srow = p[9] + (r * heads + h) * p[6];
    var acc = 0.0;
    for (var j = j0; j < last; j++) { acc = fma(s[srow + j - j0], vals[p[5] + j * p[4] + g * hd + d], acc); }
    o[p[10] + i] = acc;
}"#
        ),
    ),
    // One sequence, one mode: p: start, len, hidden, mode (0 cls, 1 last, 2 max, 3 mean,
    // 4 mean/sqrt(len), 5 weighted mean), xo, oo.
    (
        "pool",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let hidden = p[2]; let len = p[1];
    if (i >= hidden) { return; }
    let base = p[4] + p[0] * hidden + i;
    var v = 0.0;
    switch p[3] {
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
            v = v / select(f32(len), sqrt(f32(len)), p[3] == 4u);
        }
    }
    o[p[5] + i] = v;
}"#
        ),
    ),
    // p: rows, width, xo. L2 normalization per row (torch's `normalize`, eps 1e-12).
    (
        "normalize",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    if (i >= p[0]) { return; }
    let base = p[2] + i * p[1];
    var ss = 0.0;
    for (var t = 0u; t < p[1]; t++) { ss = fma(x[base + t], x[base + t], ss); }
    let n = max(sqrt(ss), 1e-12);
    for (var t = 0u; t < p[1]; t++) { x[base + t] = x[base + t] / n; }
}"#
        ),
    ),
    // Strided copy: p: rows, cols, src row stride, dst row stride, so, do, transpose.
    // `o[r][c] = x[r][c]` (narrow), or with transpose `o[c][r] = x[r][c]`.
    (
        "copy2d",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let cols = p[1];
    if (i >= p[0] * cols) { return; }
    let r = i / cols; let c = i % cols;
    let v = x[p[4] + r * p[2] + c];
    if (p[6] != 0u) { o[p[5] + c * p[0] + r] = v; } else { o[p[5] + r * p[3] + c] = v; }
}"#
        ),
    ),
    // p: rows, width, xo, so, yo. `x[r][c] = fma(s[r], y[r][c], x[r][c])`.
    (
        "row_axpy",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> s: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> y: array<f32>;\n",
            entry!(),
            r#"
    let w = p[1];
    if (i >= p[0] * w) { return; }
    let r = i / w;
    x[p[2] + i] = fma(s[p[3] + r], y[p[4] + i], x[p[2] + i]);
}"#
        ),
    ),
    // p: rows, stride, from, width, xo, s. Divides columns from..from+width of each row.
    (
        "divide_columns",
        concat!(
            "@group(0) @binding(1) var<storage, read_write> x: array<f32>;\n",
            entry!(),
            r#"
    let w = p[3];
    if (i >= p[0] * w) { return; }
    let at = p[4] + (i / w) * p[1] + p[2] + i % w;
    x[at] = x[at] / pf(5);
}"#
        ),
    ),
    // One sequence, one group: p: start, len, channels, kernel, cg, og, width, g, xo, oo.
    // Same padding inside the sequence; weight `[og, kernel·cg]` columns (tap, channel).
    (
        "conv1d",
        concat!(
            "@group(0) @binding(1) var<storage, read> x: array<f32>;\n",
            "@group(0) @binding(2) var<storage, read> w: array<f32>;\n",
            "@group(0) @binding(3) var<storage, read> b: array<f32>;\n",
            "@group(0) @binding(4) var<storage, read_write> o: array<f32>;\n",
            entry!(),
            r#"
    let len = p[1]; let kernel = p[3]; let cg = p[4]; let og = p[5];
    if (i >= len * og) { return; }
    let t = i / og; let j = i % og;
    let pad = (kernel - 1u) / 2u;
    var acc = 0.0;
    for (var tap = 0u; tap < kernel; tap++) {
        let src = i32(t) + i32(tap) - i32(pad);
        if (src >= 0 && u32(src) < len) {
            let xr = p[8] + (p[0] + u32(src)) * p[2] + p[7] * cg;
            let wr = j * kernel * cg + tap * cg;
            for (var c = 0u; c < cg; c++) { acc = fma(w[wr + c], x[xr + c], acc); }
        }
    }
    o[p[9] + (p[0] + t) * p[6] + p[7] * og + j] = acc + b[p[7] * og + j];
}"#
        ),
    ),
    // DeBERTa's disentangled bias of one sequence: p: start, len, heads, hd, max_len, qo,
    // oo, has_c2p, has_p2c, divide (0 none), divide_by. bias[(h·len + i)·len + j] =
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
    let len = p[1]; let heads = p[2]; let hd = p[3];
    if (i >= heads * len * len) { return; }
    let h = i / (len * len); let qi = (i / len) % len; let kj = i % len;
    let hidden = heads * hd; let stride = 3u * hidden;
    let r = idx[qi + p[4] - 1u - kj];
    let tb = r * hidden + h * hd;
    var v = 0.0;
    if (p[7] != 0u) {
        let q = p[5] + (p[0] + qi) * stride + h * hd;
        var acc = 0.0;
        for (var t = 0u; t < hd; t++) { acc = fma(qkv[q + t], pk[tb + t], acc); }
        if (p[9] != 0u) { acc = acc / pf(10); }
        v = acc;
    }
    if (p[8] != 0u) {
        let k = p[5] + (p[0] + kj) * stride + hidden + h * hd;
        var acc = 0.0;
        for (var t = 0u; t < hd; t++) { acc = fma(qkv[k + t], pq[tb + t], acc); }
        if (p[9] != 0u) { acc = acc / pf(10); }
        v = v + acc;
    }
    o[p[6] + i] = v;
}"#
        ),
    ),
];
