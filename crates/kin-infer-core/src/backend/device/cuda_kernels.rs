//! The CUDA backend's kernels: the WGSL kernels of [`super::wgsl`] in CUDA C, one for one,
//! with the same names, parameter structs and buffer order (`wgsl.rs` documents each). They
//! differ only in syntax: parameters arrive by value as `P_<kernel>` (generated from
//! `params.rs`, padded to 16 words), buffers as pointers, and the flat invocation index is
//! built from the block grid the same way.
//!
//! Compiled at run time by NVRTC when the CUDA backend starts (see `cuda.rs`), with its
//! default IEEE-exact division and square root (no fast math).

const PRELUDE: &str = r#"
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

const KERNELS: &str = r#"
// linear and linear_q: a 4 x 4 output tile per thread (see wgsl.rs) over the kernel's own
// `weight(column, t)`; both parameter structs start with the same fields.
template <class Q, class Weight>
__device__ __forceinline__ void tile4(const Q& p, const float* x, Weight weight, const float* b, float* o) {
    unsigned rows = p.rows, k = p.k, gn = p.gn;
    unsigned ct = (gn + 3u) / 4u;
    unsigned i = flat();
    if (i >= ((rows + 3u) / 4u) * ct) return;
    unsigned r0 = (i / ct) * 4u, c0 = (i % ct) * 4u;
    float acc[16];
    for (unsigned a = 0; a < 16u; a++) acc[a] = 0.0f;
    for (unsigned t = 0; t < k; t++) {
        float xv[4], wv[4];
        for (unsigned a = 0; a < 4u; a++) {
            xv[a] = x[p.xo + min(r0 + a, rows - 1u) * k + t];
            wv[a] = weight(min(c0 + a, gn - 1u), t);
        }
        for (unsigned a = 0; a < 4u; a++)
            for (unsigned c = 0; c < 4u; c++) acc[a * 4u + c] = fmaf(xv[a], wv[c], acc[a * 4u + c]);
    }
    for (unsigned a = 0; a < 4u; a++)
        for (unsigned c = 0; c < 4u; c++)
            if (r0 + a < rows && c0 + c < gn) {
                float v = acc[a * 4u + c];
                if (p.has_bias != 0u) v += b[p.bo + p.j0 + c0 + c];
                o[p.oo + (r0 + a) * p.ntot + p.j0 + c0 + c] = v;
            }
}
extern "C" __global__ void linear(P_linear p, const float* x, const float* w, const float* b, float* o) {
    unsigned k = p.k;
    tile4(p, x, [=](unsigned c, unsigned t) { return w[c * k + t]; }, b, o);
}
extern "C" __global__ void linear_q(P_linear_q p, const float* x, const unsigned* w, const float* b, float* o) {
    unsigned fmt = p.fmt, row_bytes = p.row_bytes;
    tile4(p, x, [=](unsigned c, unsigned t) { return wq(w, fmt, c * row_bytes, t); }, b, o);
}
extern "C" __global__ void gather_q(P_gather_q p, const unsigned* w, const unsigned* ids, float* o) {
    unsigned i = flat();
    unsigned k = p.k;
    if (i >= p.rows * k) return;
    unsigned r = i / k, t = i % k;
    o[p.oo + i] = wq(w, p.fmt, ids[r] * p.row_bytes, t);
}
extern "C" __global__ void matmul(P_matmul p, const float* a, const float* b, float* o) {
    unsigned i = flat();
    unsigned m = p.m, k = p.k, n = p.n;
    if (i >= m * n) return;
    unsigned r = i / n, c = i % n;
    float acc = 0.0f;
    for (unsigned t = 0; t < k; t++) acc = fmaf(a[p.ao + r * p.lda + t], b[p.bo + t * p.ldb + c], acc);
    o[p.oo + r * n + c] = acc;
}
extern "C" __global__ void layer_norm(P_layer_norm p, float* x, const float* w, const float* b) {
    unsigned i = flat();
    unsigned n = p.width;
    if (i >= p.rows) return;
    unsigned base = p.xo + i * n;
    float sum = 0.0f;
    for (unsigned t = 0; t < n; t++) sum += x[base + t];
    float mean = sum / (float)n;
    float ss = 0.0f;
    for (unsigned t = 0; t < n; t++) { float d = x[base + t] - mean; ss = fmaf(d, d, ss); }
    float inv = 1.0f / sqrtf(ss / (float)n + p.eps);
    for (unsigned t = 0; t < n; t++) x[base + t] = fmaf((x[base + t] - mean) * inv, w[t], b[t]);
}
extern "C" __global__ void rms_norm(P_rms_norm p, const float* x, const float* w, float* o) {
    unsigned i = flat();
    unsigned n = p.width;
    if (i >= p.rows) return;
    unsigned xb = p.xo + i * n, ob = p.oo + i * n;
    float ss = 0.0f;
    for (unsigned t = 0; t < n; t++) ss = fmaf(x[xb + t], x[xb + t], ss);
    float inv = 1.0f / sqrtf(ss / (float)n + p.eps);
    for (unsigned t = 0; t < n; t++) o[ob + t] = w[t] * (x[xb + t] * inv);
}
extern "C" __global__ void unary(P_unary p, float* x) {
    unsigned i = flat();
    if (i >= p.len) return;
    float v = x[p.xo + i];
    float y;
    switch (p.op) {
        case 5u: y = v * p.s; break;
        case 6u: y = tanh_k(v / p.s) * p.s; break;
        default: y = act_k(v, p.op);
    }
    x[p.xo + i] = y;
}
extern "C" __global__ void binary(P_binary p, float* x, const float* y) {
    unsigned i = flat();
    if (i >= p.len) return;
    float a = x[p.xo + i], b = y[p.yo + i];
    x[p.xo + i] = p.op == 1u ? a * b : a + b;
}
extern "C" __global__ void glu(P_glu p, const float* g, float* o) {
    unsigned i = flat();
    unsigned w = p.width;
    if (i >= p.rows * w) return;
    unsigned r = i / w, j = i % w;
    unsigned base = p.go + r * 2u * w;
    o[p.oo + i] = act_k(g[base + j], p.act) * g[base + w + j];
}
extern "C" __global__ void gather(P_gather p, const float* t, const unsigned* ids, float* o) {
    unsigned i = flat();
    unsigned w = p.width;
    if (i >= p.rows * w) return;
    unsigned r = i / w, c = i % w;
    float v = t[ids[r] * w + c];
    unsigned at = p.oo + i;
    o[at] = p.add != 0u ? o[at] + v : v;
}
extern "C" __global__ void rope(P_rope p, float* x, const float* cs) {
    unsigned i = flat();
    unsigned hd = p.head_dim, hh = p.dim / 2u;
    unsigned heads = p.width / hd;
    if (i >= p.rows * heads * hh) return;
    unsigned r = i / (heads * hh);
    unsigned h = (i / hh) % heads;
    unsigned k = i % hh;
    float c = cs[r * 2u * hh + k], s = cs[r * 2u * hh + hh + k];
    unsigned base = p.xo + r * p.stride + h * hd;
    unsigned a, b;
    if (p.interleaved != 0u) { a = base + 2u * k; b = a + 1u; } else { a = base + k; b = base + hh + k; }
    float x1 = x[a], x2 = x[b];
    x[a] = x1 * c - x2 * s;
    x[b] = x2 * c + x1 * s;
}
extern "C" __global__ void attn_scores(P_attn_scores p, const float* qkv, const float* bias, float* s) {
    unsigned i = flat();
    unsigned len = p.len, heads = p.heads, hd = p.hd;
    if (i >= heads * len * len) return;
    unsigned h = i / (len * len), qi = (i / len) % len, kj = i % len;
    unsigned hidden = heads * hd, stride = 3u * hidden;
    unsigned q = p.qo + qi * stride + h * hd;
    unsigned k = p.qo + kj * stride + hidden + h * hd;
    float acc = 0.0f;
    for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[q + t], qkv[k + t], acc);
    float v = acc * p.scale;
    switch (p.kind) {
        case 1u: v += bias[h * (2u * p.max_len - 1u) + (p.max_len - 1u) + kj - qi]; break;
        case 2u: v += -(bias[h] * (float)(max(qi, kj) - min(qi, kj))); break;
        case 3u: v += bias[p.bo + i]; break;
        default: break;
    }
    s[i] = v;
}
extern "C" __global__ void softmax(P_softmax p, float* x) {
    unsigned i = flat();
    if (i >= p.rows) return;
    unsigned n = p.width;
    if (p.causal != 0u) {
        unsigned pos = p.pos0 + i / p.heads;
        unsigned last = pos + 1u;
        unsigned j0 = 0u;
        if (p.window != 0u && last > p.window) j0 = last - p.window;
        n = last - j0;
    }
    unsigned base = p.xo + i * p.width;
    float m = x[base];
    for (unsigned t = 1; t < n; t++) m = fmaxf(m, x[base + t]);
    float sum = 0.0f;
    for (unsigned t = 0; t < n; t++) { float e = expf(x[base + t] - m); x[base + t] = e; sum += e; }
    float inv = 1.0f / sum;
    for (unsigned t = 0; t < n; t++) x[base + t] = x[base + t] * inv;
}
extern "C" __global__ void attn_context(P_attn_context p, const float* qkv, const float* s, float* o) {
    unsigned i = flat();
    unsigned len = p.len, heads = p.heads, hd = p.hd;
    unsigned hidden = heads * hd;
    if (i >= len * hidden) return;
    unsigned qi = i / hidden, col = i % hidden, h = col / hd;
    unsigned stride = 3u * hidden;
    unsigned srow = (h * len + qi) * len;
    float acc = 0.0f;
    for (unsigned j = 0; j < len; j++) acc = fmaf(s[srow + j], qkv[p.qo + j * stride + 2u * hidden + col], acc);
    o[p.oo + qi * hidden + col] = acc;
}
extern "C" __global__ void kv_append(P_kv_append p, const float* qkv, float* kc, float* vc) {
    unsigned i = flat();
    unsigned kv = p.kv_dim;
    if (i >= p.rows * kv) return;
    unsigned r = i / kv, c = i % kv;
    unsigned row = p.qo + r * (p.q_dim + 2u * kv);
    unsigned t = p.start + r;
    kc[p.ko + c * p.capacity + t] = qkv[row + p.q_dim + c];
    vc[p.vo + t * kv + c] = qkv[row + p.q_dim + kv + c];
}
extern "C" __global__ void causal_scores(P_causal_scores p, const float* q, const float* keys, float* s) {
    unsigned i = flat();
    unsigned heads = p.heads, hd = p.hd, span = p.span;
    if (i >= p.cr * heads * span) return;
    unsigned rh = i / span, jj = i % span;
    unsigned r = rh / heads, h = rh % heads;
    unsigned last = p.pos0 + r + 1u;
    unsigned j0 = 0u;
    if (p.window != 0u && last > p.window) j0 = last - p.window;
    unsigned j = j0 + jj;
    if (j >= last) return;
    unsigned g = h / p.kv_group;
    unsigned qb = p.qo + r * p.q_stride + h * hd;
    unsigned kb = p.ko + g * hd * p.capacity + j;
    float acc = 0.0f;
    for (unsigned t = 0; t < hd; t++) acc = fmaf(q[qb + t], keys[kb + t * p.capacity], acc);
    float v = acc * p.scale;
    if (p.softcap != 0.0f) { float cap = p.softcap; v = tanh_k(v / cap) * cap; }
    s[p.so + rh * p.capacity + jj] = v;
}
extern "C" __global__ void causal_context(P_causal_context p, const float* s, const float* vals, float* o) {
    unsigned i = flat();
    unsigned heads = p.heads, hd = p.hd, qd = heads * hd;
    if (i >= p.cr * qd) return;
    unsigned r = i / qd, col = i % qd, h = col / hd, d = col % hd;
    unsigned g = h / p.kv_group;
    unsigned last = p.pos0 + r + 1u;
    unsigned j0 = 0u;
    if (p.window != 0u && last > p.window) j0 = last - p.window;
    unsigned srow = p.so + (r * heads + h) * p.capacity;
    float acc = 0.0f;
    for (unsigned j = j0; j < last; j++) acc = fmaf(s[srow + j - j0], vals[p.vo + j * p.kv_dim + g * hd + d], acc);
    o[p.oo + i] = acc;
}
extern "C" __global__ void pool(P_pool p, const float* x, float* o) {
    unsigned i = flat();
    unsigned hidden = p.hidden, len = p.len;
    if (i >= hidden) return;
    unsigned base = p.xo + p.start * hidden + i;
    float v = 0.0f;
    switch (p.mode) {
        case 0u: v = x[base]; break;
        case 1u: v = x[base + (len - 1u) * hidden]; break;
        case 2u:
            v = x[base];
            for (unsigned r = 1; r < len; r++) v = fmaxf(v, x[base + r * hidden]);
            break;
        case 5u:
            for (unsigned r = 0; r < len; r++) v = fmaf(x[base + r * hidden], (float)(r + 1u), v);
            v = v / (float)(len * (len + 1u) / 2u);
            break;
        default:
            for (unsigned r = 0; r < len; r++) v += x[base + r * hidden];
            v = v / (p.mode == 4u ? sqrtf((float)len) : (float)len);
    }
    o[p.oo + i] = v;
}
extern "C" __global__ void normalize(P_normalize p, float* x) {
    unsigned i = flat();
    if (i >= p.rows) return;
    unsigned base = p.xo + i * p.width;
    float ss = 0.0f;
    for (unsigned t = 0; t < p.width; t++) ss = fmaf(x[base + t], x[base + t], ss);
    float n = fmaxf(sqrtf(ss), 1e-12f);
    for (unsigned t = 0; t < p.width; t++) x[base + t] = x[base + t] / n;
}
extern "C" __global__ void copy2d(P_copy2d p, const float* x, float* o) {
    unsigned i = flat();
    unsigned cols = p.cols;
    if (i >= p.rows * cols) return;
    unsigned r = i / cols, c = i % cols;
    float v = x[p.xo + r * p.src_stride + c];
    if (p.transpose != 0u) o[p.oo + c * p.rows + r] = v; else o[p.oo + r * p.dst_stride + c] = v;
}
extern "C" __global__ void row_axpy(P_row_axpy p, float* x, const float* s, const float* y) {
    unsigned i = flat();
    unsigned w = p.width;
    if (i >= p.rows * w) return;
    unsigned r = i / w;
    x[p.xo + i] = fmaf(s[p.so + r], y[p.yo + i], x[p.xo + i]);
}
extern "C" __global__ void divide_columns(P_divide_columns p, float* x) {
    unsigned i = flat();
    unsigned w = p.width;
    if (i >= p.rows * w) return;
    unsigned at = p.xo + (i / w) * p.stride + p.col0 + i % w;
    x[at] = x[at] / p.s;
}
extern "C" __global__ void conv1d(P_conv1d p, const float* x, const float* w, const float* b, float* o) {
    unsigned i = flat();
    unsigned len = p.len, kernel = p.kernel, cg = p.cg, og = p.og;
    if (i >= len * og) return;
    unsigned t = i / og, j = i % og;
    unsigned pad = (kernel - 1u) / 2u;
    float acc = 0.0f;
    for (unsigned tap = 0; tap < kernel; tap++) {
        int src = (int)t + (int)tap - (int)pad;
        if (src >= 0 && (unsigned)src < len) {
            unsigned xr = p.xo + (p.start + (unsigned)src) * p.channels + p.g * cg;
            unsigned wr = j * kernel * cg + tap * cg;
            for (unsigned c = 0; c < cg; c++) acc = fmaf(w[wr + c], x[xr + c], acc);
        }
    }
    o[p.oo + (p.start + t) * p.width + p.g * og + j] = acc + b[p.g * og + j];
}
extern "C" __global__ void disentangled(P_disentangled p, const float* qkv, const float* pk, const float* pq,
                                        const unsigned* idx, float* o) {
    unsigned i = flat();
    unsigned len = p.len, heads = p.heads, hd = p.hd;
    if (i >= heads * len * len) return;
    unsigned h = i / (len * len), qi = (i / len) % len, kj = i % len;
    unsigned hidden = heads * hd, stride = 3u * hidden;
    unsigned r = idx[qi + p.max_len - 1u - kj];
    unsigned tb = r * hidden + h * hd;
    float v = 0.0f;
    if (p.has_c2p != 0u) {
        unsigned q = p.qo + (p.start + qi) * stride + h * hd;
        float acc = 0.0f;
        for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[q + t], pk[tb + t], acc);
        if (p.divide != 0u) acc = acc / p.divide_by;
        v = acc;
    }
    if (p.has_p2c != 0u) {
        unsigned k = p.qo + (p.start + kj) * stride + hidden + h * hd;
        float acc = 0.0f;
        for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[k + t], pq[tb + t], acc);
        if (p.divide != 0u) acc = acc / p.divide_by;
        v = v + acc;
    }
    o[p.oo + i] = v;
}
"#;

/// Every kernel's name (the same set as the WGSL kernels: `params.rs`'s).
pub(super) fn names() -> impl Iterator<Item = &'static str> {
    super::params::KERNELS.iter().map(|(op, _)| *op)
}

/// The whole CUDA C source: the CPU's math constants, the format codes, the parameter
/// structs, the prelude, every kernel.
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
    format!("{defines}{codes}{structs}{PRELUDE}{KERNELS}")
}
