//! Every GPU kernel's body, written once in the kernel dialect (`dialect.rs`): the WGSL
//! shader (`wgsl.rs`) and the CUDA kernel (`cuda_kernels.rs`) are both generated from it, with
//! the parameter struct of `params.rs`. In scope in a body: `p` (the parameters), `i` (the
//! invocation's flat index), the buffers by name, the dialect's helpers.
//!
//! One invocation computes one output element (or one row) with a sequential loop: each
//! element's reduction has one fixed order whatever the batch (no atomics anywhere).

/// A buffer a kernel binds after its parameters: name, element type (`f32`/`u32`), written.
pub(crate) type Buf = (&'static str, &'static str, bool);

const fn r(name: &'static str) -> Buf {
    (name, "f32", false)
}

const fn rw(name: &'static str) -> Buf {
    (name, "f32", true)
}

const fn ru(name: &'static str) -> Buf {
    (name, "u32", false)
}

/// One kernel: its name (as in `params.rs`), buffers in launch order, the `weight(c, t)`
/// expression its body reads (`linear`'s weights in a format), and the body.
pub(crate) struct Body {
    pub(crate) op: &'static str,
    pub(crate) bufs: &'static [Buf],
    pub(crate) weight: Option<&'static str>,
    pub(crate) body: &'static str,
}

/// The body of `op`.
#[cfg(feature = "wgpu")]
pub(crate) fn body(op: &str) -> Option<&'static Body> {
    BODIES.iter().find(|k| k.op == op)
}

/// `linear` and `linear_q` over their own `weight(column, t)`: a 4 × 4 output tile per
/// invocation (4 rows, 4 columns): each input and weight read once serves four products.
/// Every element is still its own fma chain over k from 0, so the tiling changes no bit (nor
/// does a row's tile partners: rows past `rows` read a clamped row, unused).
const TILE4: &str = r#"
    u32 rows = p.rows;
    u32 k = p.k;
    u32 gn = p.gn;
    u32 ct = (gn + 3u) / 4u;
    if (i >= ((rows + 3u) / 4u) * ct) { return; }
    u32 r0 = (i / ct) * 4u;
    u32 c0 = (i % ct) * 4u;
    f32 acc[16];
    for (u32 a = 0u; a < 16u; a++) { acc[a] = 0.0f; }
    for (u32 t = 0u; t < k; t++) {
        f32 xv[4];
        f32 wv[4];
        for (u32 a = 0u; a < 4u; a++) {
            xv[a] = x[p.xo + min(r0 + a, rows - 1u) * k + t];
            wv[a] = weight(min(c0 + a, gn - 1u), t);
        }
        for (u32 a = 0u; a < 4u; a++) {
            for (u32 c = 0u; c < 4u; c++) { acc[a * 4u + c] = fma(xv[a], wv[c], acc[a * 4u + c]); }
        }
    }
    for (u32 a = 0u; a < 4u; a++) {
        for (u32 c = 0u; c < 4u; c++) {
            if (r0 + a < rows && c0 + c < gn) {
                f32 v = acc[a * 4u + c];
                if (p.has_bias != 0u) { v += b[p.bo + p.j0 + c0 + c]; }
                o[p.oo + (r0 + a) * p.ntot + p.j0 + c0 + c] = v;
            }
        }
    }
"#;

/// The start of a kernel over one sequence's (head, query, key) triples (`attn_scores`,
/// `disentangled`): one invocation per triple, from `p.len`, `p.heads`, `p.hd`; q/k/v rows
/// `stride` apart. A macro because `concat!` takes literals only.
macro_rules! pair_index {
    () => {
        r#"
    u32 len = p.len;
    u32 heads = p.heads;
    u32 hd = p.hd;
    if (i >= heads * len * len) { return; }
    u32 h = i / (len * len);
    u32 qi = (i / len) % len;
    u32 kj = i % len;
    u32 hidden = heads * hd;
    u32 stride = 3u * hidden;"#
    };
}

/// Every kernel (the same set as `params::KERNELS`; a test holds them equal).
pub(crate) const BODIES: &[Body] = &[
    // `o[r][j0 + c] = x[r] · w[c] + b[j0 + c]` for one column group of `gn` outputs (weights
    // `[gn, k]`, torch's layout).
    Body {
        op: "linear",
        bufs: &[r("x"), r("w"), r("b"), rw("o")],
        weight: Some("w[c * p.k + t]"),
        body: TILE4,
    },
    // `linear` over weights in a stored format.
    Body {
        op: "linear_q",
        bufs: &[r("x"), ru("w"), r("b"), rw("o")],
        weight: Some("wq(w, p.fmt, c * p.row_bytes, t)"),
        body: TILE4,
    },
    // Rows `ids[r]` of a weight in a stored format, as f32.
    Body {
        op: "gather_q",
        bufs: &[ru("w"), ru("ids"), rw("o")],
        weight: None,
        body: r#"
    u32 k = p.k;
    if (i >= p.rows * k) { return; }
    u32 r = i / k;
    u32 t = i % k;
    o[p.oo + i] = wq(w, p.fmt, ids[r] * p.row_bytes, t);
"#,
    },
    // `o[i][j] = Σ_t a[i][t] · b[t][j]`.
    Body {
        op: "matmul",
        bufs: &[r("a"), r("b"), rw("o")],
        weight: None,
        body: r#"
    u32 m = p.m;
    u32 k = p.k;
    u32 n = p.n;
    if (i >= m * n) { return; }
    u32 r = i / n;
    u32 c = i % n;
    f32 acc = 0.0f;
    for (u32 t = 0u; t < k; t++) { acc = fma(a[p.ao + r * p.lda + t], b[p.bo + t * p.ldb + c], acc); }
    o[p.oo + r * n + c] = acc;
"#,
    },
    // Layer norm in place, one invocation per row: torch's biased variance.
    Body {
        op: "layer_norm",
        bufs: &[rw("x"), r("w"), r("b")],
        weight: None,
        body: r#"
    u32 n = p.width;
    if (i >= p.rows) { return; }
    u32 base = p.xo + i * n;
    f32 sum = 0.0f;
    for (u32 t = 0u; t < n; t++) { sum += x[base + t]; }
    f32 mean = sum / f32(n);
    f32 ss = 0.0f;
    for (u32 t = 0u; t < n; t++) { f32 d = x[base + t] - mean; ss = fma(d, d, ss); }
    f32 inv = 1.0f / sqrt(ss / f32(n) + p.eps);
    for (u32 t = 0u; t < n; t++) { x[base + t] = fma((x[base + t] - mean) * inv, w[t], b[t]); }
"#,
    },
    // RMS norm, one invocation per row.
    Body {
        op: "rms_norm",
        bufs: &[r("x"), r("w"), rw("o")],
        weight: None,
        body: r#"
    u32 n = p.width;
    if (i >= p.rows) { return; }
    u32 xb = p.xo + i * n;
    u32 ob = p.oo + i * n;
    f32 ss = 0.0f;
    for (u32 t = 0u; t < n; t++) { ss = fma(x[xb + t], x[xb + t], ss); }
    f32 inv = 1.0f / sqrt(ss / f32(n) + p.eps);
    for (u32 t = 0u; t < n; t++) { o[ob + t] = w[t] * (x[xb + t] * inv); }
"#,
    },
    // Elementwise in place: op 0..4 an activation (act_k), 5 scale by s, 6 softcap at s.
    Body {
        op: "unary",
        bufs: &[rw("x")],
        weight: None,
        body: r#"
    if (i >= p.len) { return; }
    f32 v = x[p.xo + i];
    f32 y;
    switch (p.op) {
        case 5u: { y = v * p.s; break; }
        case 6u: { y = tanh_k(v / p.s) * p.s; break; }
        default: { y = act_k(v, p.op); }
    }
    x[p.xo + i] = y;
"#,
    },
    // `x op= y`: 0 add, 1 mul.
    Body {
        op: "binary",
        bufs: &[rw("x"), r("y")],
        weight: None,
        body: r#"
    if (i >= p.len) { return; }
    f32 a = x[p.xo + i];
    f32 b = y[p.yo + i];
    x[p.xo + i] = select(a + b, a * b, p.op == 1u);
"#,
    },
    // `o[r][j] = act(gate) · up` of `[gate | up]` rows.
    Body {
        op: "glu",
        bufs: &[r("g"), rw("o")],
        weight: None,
        body: r#"
    u32 w = p.width;
    if (i >= p.rows * w) { return; }
    u32 r = i / w;
    u32 j = i % w;
    u32 base = p.go + r * 2u * w;
    o[p.oo + i] = act_k(g[base + j], p.act) * g[base + w + j];
"#,
    },
    // Row r of o (=|+=) row ids[r] of the table.
    Body {
        op: "gather",
        bufs: &[r("t"), ru("ids"), rw("o")],
        weight: None,
        body: r#"
    u32 w = p.width;
    if (i >= p.rows * w) { return; }
    u32 r = i / w;
    u32 c = i % w;
    f32 v = t[ids[r] * w + c];
    u32 at = p.oo + i;
    o[at] = select(v, o[at] + v, p.add != 0u);
"#,
    },
    // Rotary embedding in place. cs: per row `[cos (dim/2) | sin (dim/2)]`. One invocation
    // per rotated pair.
    Body {
        op: "rope",
        bufs: &[rw("x"), r("cs")],
        weight: None,
        body: r#"
    u32 hd = p.head_dim;
    u32 hh = p.dim / 2u;
    u32 heads = p.width / hd;
    if (i >= p.rows * heads * hh) { return; }
    u32 r = i / (heads * hh);
    u32 h = (i / hh) % heads;
    u32 k = i % hh;
    f32 c = cs[r * 2u * hh + k];
    f32 s = cs[r * 2u * hh + hh + k];
    u32 base = p.xo + r * p.stride + h * hd;
    u32 a;
    u32 b;
    if (p.interleaved != 0u) { a = base + 2u * k; b = a + 1u; } else { a = base + k; b = base + hh + k; }
    f32 x1 = x[a];
    f32 x2 = x[b];
    x[a] = x1 * c - x2 * s;
    x[b] = x2 * c + x1 * s;
"#,
    },
    // Bidirectional attention scores of one sequence:
    // s[(h·len + i)·len + j] = (q_i · k_j)·scale + bias.
    Body {
        op: "attn_scores",
        bufs: &[r("qkv"), r("bias"), rw("s")],
        weight: None,
        body: concat!(
            pair_index!(),
            r#"
    u32 q = p.qo + qi * stride + h * hd;
    u32 k = p.qo + kj * stride + hidden + h * hd;
    f32 acc = 0.0f;
    for (u32 t = 0u; t < hd; t++) { acc = fma(qkv[q + t], qkv[k + t], acc); }
    f32 v = acc * p.scale;
    switch (p.kind) {
        case 1u: { v += bias[h * (2u * p.max_len - 1u) + (p.max_len - 1u) + kj - qi]; break; }
        case 2u: { v += -(bias[h] * f32(max(qi, kj) - min(qi, kj))); break; }
        case 3u: { v += bias[p.bo + i]; break; }
        default: {}
    }
    s[i] = v;
"#
        ),
    },
    // Softmax of rows of scores in place; for causal attention (`p.causal`), row t of a chunk
    // at `pos0 + t / heads` holds keys j0..n (the last `window`, 0 = all).
    Body {
        op: "softmax",
        bufs: &[rw("x")],
        weight: None,
        body: r#"
    if (i >= p.rows) { return; }
    u32 n = p.width;
    if (p.causal != 0u) {
        u32 pos = p.pos0 + i / p.heads;
        u32 last = pos + 1u;
        u32 j0 = 0u;
        if (p.window != 0u && last > p.window) { j0 = last - p.window; }
        n = last - j0;
    }
    u32 base = p.xo + i * p.width;
    f32 m = x[base];
    for (u32 t = 1u; t < n; t++) { m = max(m, x[base + t]); }
    f32 sum = 0.0f;
    for (u32 t = 0u; t < n; t++) { f32 e = exp(x[base + t] - m); x[base + t] = e; sum += e; }
    f32 inv = 1.0f / sum;
    for (u32 t = 0u; t < n; t++) { x[base + t] = x[base + t] * inv; }
"#,
    },
    // Context of one sequence (`qo`: its first row in qkv, `oo`: in out).
    // out[i][h·hd + d] = Σ_j P[h][i][j] · v_j[h·hd + d], j in order.
    Body {
        op: "attn_context",
        bufs: &[r("qkv"), r("s"), rw("o")],
        weight: None,
        body: r#"
    u32 len = p.len;
    u32 hd = p.hd;
    u32 hidden = p.heads * hd;
    if (i >= len * hidden) { return; }
    u32 qi = i / hidden;
    u32 col = i % hidden;
    u32 h = col / hd;
    u32 stride = 3u * hidden;
    u32 srow = (h * len + qi) * len;
    f32 acc = 0.0f;
    for (u32 j = 0u; j < len; j++) { acc = fma(s[srow + j], qkv[p.qo + j * stride + 2u * hidden + col], acc); }
    o[p.oo + qi * hidden + col] = acc;
"#,
    },
    // Appends to the KV cache: keys transposed `[kv_dim, capacity]`, values `[capacity, kv_dim]`.
    Body {
        op: "kv_append",
        bufs: &[r("qkv"), rw("kc"), rw("vc")],
        weight: None,
        body: r#"
    u32 kv = p.kv_dim;
    if (i >= p.rows * kv) { return; }
    u32 r = i / kv;
    u32 c = i % kv;
    u32 row = p.qo + r * (p.q_dim + 2u * kv);
    u32 t = p.start + r;
    kc[p.ko + c * p.capacity + t] = qkv[row + p.q_dim + c];
    vc[p.vo + t * kv + c] = qkv[row + p.q_dim + kv + c];
"#,
    },
    // Causal scores of a chunk of `cr` query rows at positions pos0 + r (window 0: none,
    // softcap 0: none, span: the most keys a row reads). Row (r, h) of the scratch holds keys
    // j0..=pos at columns 0.. (capacity apart).
    Body {
        op: "causal_scores",
        bufs: &[r("q"), r("keys"), rw("s")],
        weight: None,
        body: r#"
    u32 heads = p.heads;
    u32 hd = p.hd;
    u32 span = p.span;
    if (i >= p.cr * heads * span) { return; }
    u32 rh = i / span;
    u32 jj = i % span;
    u32 r = rh / heads;
    u32 h = rh % heads;
    u32 last = p.pos0 + r + 1u;
    u32 j0 = 0u;
    if (p.window != 0u && last > p.window) { j0 = last - p.window; }
    u32 j = j0 + jj;
    if (j >= last) { return; }
    u32 g = h / p.kv_group;
    u32 qb = p.qo + r * p.q_stride + h * hd;
    u32 kb = p.ko + g * hd * p.capacity + j;
    f32 acc = 0.0f;
    for (u32 t = 0u; t < hd; t++) { acc = fma(q[qb + t], keys[kb + t * p.capacity], acc); }
    f32 v = acc * p.scale;
    if (p.softcap != 0.0f) { f32 cap = p.softcap; v = tanh_k(v / cap) * cap; }
    s[p.so + rh * p.capacity + jj] = v;
"#,
    },
    // Causal context of a chunk:
    // out[r][h·hd + d] = Σ_j P[r, h][j] · values[j0 + j][g·hd + d].
    Body {
        op: "causal_context",
        bufs: &[r("s"), r("vals"), rw("o")],
        weight: None,
        body: r#"
    u32 heads = p.heads;
    u32 hd = p.hd;
    u32 qd = heads * hd;
    if (i >= p.cr * qd) { return; }
    u32 r = i / qd;
    u32 col = i % qd;
    u32 h = col / hd;
    u32 d = col % hd;
    u32 g = h / p.kv_group;
    u32 last = p.pos0 + r + 1u;
    u32 j0 = 0u;
    if (p.window != 0u && last > p.window) { j0 = last - p.window; }
    u32 srow = p.so + (r * heads + h) * p.capacity;
    f32 acc = 0.0f;
    for (u32 j = j0; j < last; j++) { acc = fma(s[srow + j - j0], vals[p.vo + j * p.kv_dim + g * hd + d], acc); }
    o[p.oo + i] = acc;
"#,
    },
    // One sequence, one mode (0 cls, 1 last, 2 max, 3 mean, 4 mean/sqrt(len), 5 weighted mean).
    Body {
        op: "pool",
        bufs: &[r("x"), rw("o")],
        weight: None,
        body: r#"
    u32 hidden = p.hidden;
    u32 len = p.len;
    if (i >= hidden) { return; }
    u32 base = p.xo + p.start * hidden + i;
    f32 v = 0.0f;
    switch (p.mode) {
        case 0u: { v = x[base]; break; }
        case 1u: { v = x[base + (len - 1u) * hidden]; break; }
        case 2u: {
            v = x[base];
            for (u32 r = 1u; r < len; r++) { v = max(v, x[base + r * hidden]); }
            break;
        }
        case 5u: {
            for (u32 r = 0u; r < len; r++) { v = fma(x[base + r * hidden], f32(r + 1u), v); }
            v = v / f32(len * (len + 1u) / 2u);
            break;
        }
        default: {
            for (u32 r = 0u; r < len; r++) { v += x[base + r * hidden]; }
            v = v / select(f32(len), sqrt(f32(len)), p.mode == 4u);
        }
    }
    o[p.oo + i] = v;
"#,
    },
    // L2 normalization per row (torch's `normalize`, eps 1e-12).
    Body {
        op: "normalize",
        bufs: &[rw("x")],
        weight: None,
        body: r#"
    if (i >= p.rows) { return; }
    u32 base = p.xo + i * p.width;
    f32 ss = 0.0f;
    for (u32 t = 0u; t < p.width; t++) { ss = fma(x[base + t], x[base + t], ss); }
    f32 n = max(sqrt(ss), 1e-12f);
    for (u32 t = 0u; t < p.width; t++) { x[base + t] = x[base + t] / n; }
"#,
    },
    // Strided copy: `o[r][c] = x[r][c]` (narrow), or with transpose `o[c][r] = x[r][c]`.
    Body {
        op: "copy2d",
        bufs: &[r("x"), rw("o")],
        weight: None,
        body: r#"
    u32 cols = p.cols;
    if (i >= p.rows * cols) { return; }
    u32 r = i / cols;
    u32 c = i % cols;
    f32 v = x[p.xo + r * p.src_stride + c];
    if (p.transpose != 0u) { o[p.oo + c * p.rows + r] = v; } else { o[p.oo + r * p.dst_stride + c] = v; }
"#,
    },
    // `x[r][c] = fma(s[r], y[r][c], x[r][c])`.
    Body {
        op: "row_axpy",
        bufs: &[rw("x"), r("s"), r("y")],
        weight: None,
        body: r#"
    u32 w = p.width;
    if (i >= p.rows * w) { return; }
    u32 r = i / w;
    x[p.xo + i] = fma(s[p.so + r], y[p.yo + i], x[p.xo + i]);
"#,
    },
    // Divides columns col0..col0 + width of each row by s.
    Body {
        op: "divide_columns",
        bufs: &[rw("x")],
        weight: None,
        body: r#"
    u32 w = p.width;
    if (i >= p.rows * w) { return; }
    u32 at = p.xo + (i / w) * p.stride + p.col0 + i % w;
    x[at] = x[at] / p.s;
"#,
    },
    // One sequence, one group g of a grouped convolution: same padding inside the sequence;
    // weight `[og, kernel·cg]` columns (tap, channel).
    Body {
        op: "conv1d",
        bufs: &[r("x"), r("w"), r("b"), rw("o")],
        weight: None,
        body: r#"
    u32 len = p.len;
    u32 kernel = p.kernel;
    u32 cg = p.cg;
    u32 og = p.og;
    if (i >= len * og) { return; }
    u32 t = i / og;
    u32 j = i % og;
    u32 pad = (kernel - 1u) / 2u;
    f32 acc = 0.0f;
    for (u32 tap = 0u; tap < kernel; tap++) {
        i32 src = i32(t) + i32(tap) - i32(pad);
        if (src >= 0 && u32(src) < len) {
            u32 xr = p.xo + (p.start + u32(src)) * p.channels + p.g * cg;
            u32 wr = j * kernel * cg + tap * cg;
            for (u32 c = 0u; c < cg; c++) { acc = fma(w[wr + c], x[xr + c], acc); }
        }
    }
    o[p.oo + (p.start + t) * p.width + p.g * og + j] = acc + b[p.g * og + j];
"#,
    },
    // DeBERTa's disentangled bias of one sequence: bias[(h·len + i)·len + j] =
    // q_i · pos_key[r] + k_j · pos_query[r] with r = index[(i − j) + max_len − 1].
    Body {
        op: "disentangled",
        bufs: &[r("qkv"), r("pk"), r("pq"), ru("idx"), rw("o")],
        weight: None,
        body: concat!(
            pair_index!(),
            r#"
    u32 r = idx[qi + p.max_len - 1u - kj];
    u32 tb = r * hidden + h * hd;
    f32 v = 0.0f;
    if (p.has_c2p != 0u) {
        u32 q = p.qo + (p.start + qi) * stride + h * hd;
        f32 acc = 0.0f;
        for (u32 t = 0u; t < hd; t++) { acc = fma(qkv[q + t], pk[tb + t], acc); }
        if (p.divide != 0u) { acc = acc / p.divide_by; }
        v = acc;
    }
    if (p.has_p2c != 0u) {
        u32 k = p.qo + (p.start + kj) * stride + hidden + h * hd;
        f32 acc = 0.0f;
        for (u32 t = 0u; t < hd; t++) { acc = fma(qkv[k + t], pq[tb + t], acc); }
        if (p.divide != 0u) { acc = acc / p.divide_by; }
        v = v + acc;
    }
    o[p.oo + i] = v;
"#
        ),
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kernel_has_one_body_and_every_body_a_layout() {
        let ops: Vec<&str> = super::super::params::KERNELS
            .iter()
            .map(|(op, _)| *op)
            .collect();
        let bodies: Vec<&str> = BODIES.iter().map(|b| b.op).collect();
        assert_eq!(ops, bodies);
    }
}
