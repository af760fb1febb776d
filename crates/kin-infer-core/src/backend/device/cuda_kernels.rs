//! The CUDA backend's kernels: the WGSL kernels of [`super::wgsl`] in CUDA C, one for one,
//! with the same names, parameter words and buffer order (`wgsl.rs` documents each). They
//! differ only in syntax: parameters arrive by value as `P` (16 words), buffers as pointers,
//! and the flat invocation index is built from the block grid the same way.
//!
//! Compiled at run time by NVRTC when the CUDA backend starts (see `cuda.rs`), with its
//! default IEEE-exact division and square root (no fast math).

const PRELUDE: &str = r#"
struct P { unsigned v[16]; };
__device__ __forceinline__ float pf(const P& p, unsigned i) { return __uint_as_float(p.v[i]); }
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
        case 1u: return __uint_as_float(half_at(w, base + 2u * t) << 16);
        case 2u: return f16_k(half_at(w, base + 2u * t));
        case 3u: {
            unsigned bb = base + (t / 32u) * 34u;
            int q = (int)(byte_at(w, bb + 2u + t % 32u) << 24) >> 24;
            return __fmul_rn((float)q, f16_k(half_at(w, bb)));
        }
        case 4u: {
            unsigned bb = base + (t / 32u) * 18u;
            return __fmul_rn(f16_k(half_at(w, bb)), (float)((int)nib(w, bb + 2u, t % 32u) - 8));
        }
        case 5u: {
            unsigned bb = base + (t / 32u) * 20u;
            unsigned q = nib(w, bb + 4u, t % 32u);
            return __fadd_rn(__fmul_rn(f16_k(half_at(w, bb)), (float)q), f16_k(half_at(w, bb + 2u)));
        }
        case 6u: {
            unsigned bb = base + (t / 32u) * 22u, j = t % 32u;
            unsigned q = nib(w, bb + 6u, j) | (qh5(w, bb + 2u, j) << 4);
            return __fmul_rn(f16_k(half_at(w, bb)), (float)((int)q - 16));
        }
        case 7u: {
            unsigned bb = base + (t / 32u) * 24u, j = t % 32u;
            unsigned q = nib(w, bb + 8u, j) | (qh5(w, bb + 4u, j) << 4);
            return __fadd_rn(__fmul_rn(f16_k(half_at(w, bb)), (float)q), f16_k(half_at(w, bb + 2u)));
        }
        case 8u:
        case 9u: {
            bool five = fmt == 9u;
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
        default: {
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
// linear and linear_q: a 4 x 4 output tile per thread (see wgsl.rs)
extern "C" __global__ void linear(P p, const float* x, const float* w, const float* b, float* o) {
#define WEIGHT(c, t) w[(c) * k + (t)]
    unsigned rows = p.v[0], k = p.v[1], gn = p.v[2];
    unsigned ct = (gn + 3u) / 4u;
    unsigned i = flat();
    if (i >= ((rows + 3u) / 4u) * ct) return;
    unsigned r0 = (i / ct) * 4u, c0 = (i % ct) * 4u;
    float acc[16];
    for (unsigned a = 0; a < 16u; a++) acc[a] = 0.0f;
    for (unsigned t = 0; t < k; t++) {
        float xv[4], wv[4];
        for (unsigned a = 0; a < 4u; a++) {
            xv[a] = x[p.v[5] + min(r0 + a, rows - 1u) * k + t];
            wv[a] = WEIGHT(min(c0 + a, gn - 1u), t);
        }
        for (unsigned a = 0; a < 4u; a++)
            for (unsigned c = 0; c < 4u; c++) acc[a * 4u + c] = fmaf(xv[a], wv[c], acc[a * 4u + c]);
    }
    for (unsigned a = 0; a < 4u; a++)
        for (unsigned c = 0; c < 4u; c++)
            if (r0 + a < rows && c0 + c < gn) {
                float v = acc[a * 4u + c];
                if (p.v[7] != 0u) v += b[p.v[8] + p.v[4] + c0 + c];
                o[p.v[6] + (r0 + a) * p.v[3] + p.v[4] + c0 + c] = v;
            }
}
#undef WEIGHT
extern "C" __global__ void linear_q(P p, const float* x, const unsigned* w, const float* b, float* o) {
#define WEIGHT(c, t) wq(w, p.v[9], (c) * p.v[10], (t))
    unsigned rows = p.v[0], k = p.v[1], gn = p.v[2];
    unsigned ct = (gn + 3u) / 4u;
    unsigned i = flat();
    if (i >= ((rows + 3u) / 4u) * ct) return;
    unsigned r0 = (i / ct) * 4u, c0 = (i % ct) * 4u;
    float acc[16];
    for (unsigned a = 0; a < 16u; a++) acc[a] = 0.0f;
    for (unsigned t = 0; t < k; t++) {
        float xv[4], wv[4];
        for (unsigned a = 0; a < 4u; a++) {
            xv[a] = x[p.v[5] + min(r0 + a, rows - 1u) * k + t];
            wv[a] = WEIGHT(min(c0 + a, gn - 1u), t);
        }
        for (unsigned a = 0; a < 4u; a++)
            for (unsigned c = 0; c < 4u; c++) acc[a * 4u + c] = fmaf(xv[a], wv[c], acc[a * 4u + c]);
    }
    for (unsigned a = 0; a < 4u; a++)
        for (unsigned c = 0; c < 4u; c++)
            if (r0 + a < rows && c0 + c < gn) {
                float v = acc[a * 4u + c];
                if (p.v[7] != 0u) v += b[p.v[8] + p.v[4] + c0 + c];
                o[p.v[6] + (r0 + a) * p.v[3] + p.v[4] + c0 + c] = v;
            }
}
#undef WEIGHT
extern "C" __global__ void gather_q(P p, const unsigned* w, const unsigned* ids, float* o) {
    unsigned i = flat();
    unsigned k = p.v[1];
    if (i >= p.v[0] * k) return;
    unsigned r = i / k, t = i % k;
    o[p.v[2] + i] = wq(w, p.v[3], ids[r] * p.v[4], t);
}
extern "C" __global__ void matmul(P p, const float* a, const float* b, float* o) {
    unsigned i = flat();
    unsigned m = p.v[0], k = p.v[1], n = p.v[2];
    if (i >= m * n) return;
    unsigned r = i / n, c = i % n;
    float acc = 0.0f;
    for (unsigned t = 0; t < k; t++) acc = fmaf(a[p.v[5] + r * p.v[3] + t], b[p.v[6] + t * p.v[4] + c], acc);
    o[p.v[7] + r * n + c] = acc;
}
extern "C" __global__ void layer_norm(P p, float* x, const float* w, const float* b) {
    unsigned i = flat();
    unsigned n = p.v[1];
    if (i >= p.v[0]) return;
    unsigned base = p.v[2] + i * n;
    float sum = 0.0f;
    for (unsigned t = 0; t < n; t++) sum += x[base + t];
    float mean = sum / (float)n;
    float ss = 0.0f;
    for (unsigned t = 0; t < n; t++) { float d = x[base + t] - mean; ss = fmaf(d, d, ss); }
    float inv = 1.0f / sqrtf(ss / (float)n + pf(p, 3));
    for (unsigned t = 0; t < n; t++) x[base + t] = fmaf((x[base + t] - mean) * inv, w[t], b[t]);
}
extern "C" __global__ void rms_norm(P p, const float* x, const float* w, float* o) {
    unsigned i = flat();
    unsigned n = p.v[1];
    if (i >= p.v[0]) return;
    unsigned xb = p.v[2] + i * n, ob = p.v[3] + i * n;
    float ss = 0.0f;
    for (unsigned t = 0; t < n; t++) ss = fmaf(x[xb + t], x[xb + t], ss);
    float inv = 1.0f / sqrtf(ss / (float)n + pf(p, 4));
    for (unsigned t = 0; t < n; t++) o[ob + t] = w[t] * (x[xb + t] * inv);
}
extern "C" __global__ void unary(P p, float* x) {
    unsigned i = flat();
    if (i >= p.v[0]) return;
    float v = x[p.v[1] + i];
    float y;
    switch (p.v[2]) {
        case 5u: y = v * pf(p, 3); break;
        case 6u: y = tanh_k(v / pf(p, 3)) * pf(p, 3); break;
        default: y = act_k(v, p.v[2]);
    }
    x[p.v[1] + i] = y;
}
extern "C" __global__ void binary(P p, float* x, const float* y) {
    unsigned i = flat();
    if (i >= p.v[0]) return;
    float a = x[p.v[1] + i], b = y[p.v[2] + i];
    x[p.v[1] + i] = p.v[3] == 1u ? a * b : a + b;
}
extern "C" __global__ void glu(P p, const float* g, float* o) {
    unsigned i = flat();
    unsigned w = p.v[1];
    if (i >= p.v[0] * w) return;
    unsigned r = i / w, j = i % w;
    unsigned base = p.v[3] + r * 2u * w;
    o[p.v[4] + i] = act_k(g[base + j], p.v[2]) * g[base + w + j];
}
extern "C" __global__ void gather(P p, const float* t, const unsigned* ids, float* o) {
    unsigned i = flat();
    unsigned w = p.v[1];
    if (i >= p.v[0] * w) return;
    unsigned r = i / w, c = i % w;
    float v = t[ids[r] * w + c];
    unsigned at = p.v[2] + i;
    o[at] = p.v[3] != 0u ? o[at] + v : v;
}
extern "C" __global__ void rope(P p, float* x, const float* cs) {
    unsigned i = flat();
    unsigned hd = p.v[3], hh = p.v[4] / 2u;
    unsigned heads = p.v[2] / hd;
    if (i >= p.v[0] * heads * hh) return;
    unsigned r = i / (heads * hh);
    unsigned h = (i / hh) % heads;
    unsigned k = i % hh;
    float c = cs[r * 2u * hh + k], s = cs[r * 2u * hh + hh + k];
    unsigned base = p.v[6] + r * p.v[1] + h * hd;
    unsigned a, b;
    if (p.v[5] != 0u) { a = base + 2u * k; b = a + 1u; } else { a = base + k; b = base + hh + k; }
    float x1 = x[a], x2 = x[b];
    x[a] = x1 * c - x2 * s;
    x[b] = x2 * c + x1 * s;
}
extern "C" __global__ void attn_scores(P p, const float* qkv, const float* bias, float* s) {
    unsigned i = flat();
    unsigned len = p.v[0], heads = p.v[1], hd = p.v[2];
    if (i >= heads * len * len) return;
    unsigned h = i / (len * len), qi = (i / len) % len, kj = i % len;
    unsigned hidden = heads * hd, stride = 3u * hidden;
    unsigned q = p.v[3] + qi * stride + h * hd;
    unsigned k = p.v[3] + kj * stride + hidden + h * hd;
    float acc = 0.0f;
    for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[q + t], qkv[k + t], acc);
    float v = acc * pf(p, 4);
    switch (p.v[5]) {
        case 1u: v += bias[h * (2u * p.v[6] - 1u) + (p.v[6] - 1u) + kj - qi]; break;
        case 2u: v += -(bias[h] * (float)(max(qi, kj) - min(qi, kj))); break;
        case 3u: v += bias[p.v[7] + i]; break;
        default: break;
    }
    s[i] = v;
}
extern "C" __global__ void softmax(P p, float* x) {
    unsigned i = flat();
    if (i >= p.v[0]) return;
    unsigned n = p.v[1];
    if (p.v[3] != 0u) {
        unsigned pos = p.v[5] + i / p.v[4];
        unsigned last = pos + 1u;
        unsigned j0 = 0u;
        if (p.v[6] != 0u && last > p.v[6]) j0 = last - p.v[6];
        n = last - j0;
    }
    unsigned base = p.v[2] + i * p.v[1];
    float m = x[base];
    for (unsigned t = 1; t < n; t++) m = fmaxf(m, x[base + t]);
    float sum = 0.0f;
    for (unsigned t = 0; t < n; t++) { float e = expf(x[base + t] - m); x[base + t] = e; sum += e; }
    float inv = 1.0f / sum;
    for (unsigned t = 0; t < n; t++) x[base + t] = x[base + t] * inv;
}
extern "C" __global__ void attn_context(P p, const float* qkv, const float* s, float* o) {
    unsigned i = flat();
    unsigned len = p.v[0], heads = p.v[1], hd = p.v[2];
    unsigned hidden = heads * hd;
    if (i >= len * hidden) return;
    unsigned qi = i / hidden, col = i % hidden, h = col / hd;
    unsigned stride = 3u * hidden;
    unsigned srow = (h * len + qi) * len;
    float acc = 0.0f;
    for (unsigned j = 0; j < len; j++) acc = fmaf(s[srow + j], qkv[p.v[3] + j * stride + 2u * hidden + col], acc);
    o[p.v[4] + qi * hidden + col] = acc;
}
extern "C" __global__ void kv_append(P p, const float* qkv, float* kc, float* vc) {
    unsigned i = flat();
    unsigned kv = p.v[2];
    if (i >= p.v[0] * kv) return;
    unsigned r = i / kv, c = i % kv;
    unsigned row = p.v[5] + r * (p.v[1] + 2u * kv);
    unsigned t = p.v[3] + r;
    kc[p.v[6] + c * p.v[4] + t] = qkv[row + p.v[1] + c];
    vc[p.v[7] + t * kv + c] = qkv[row + p.v[1] + kv + c];
}
extern "C" __global__ void causal_scores(P p, const float* q, const float* keys, float* s) {
    unsigned i = flat();
    unsigned heads = p.v[1], hd = p.v[2], span = p.v[12];
    if (i >= p.v[0] * heads * span) return;
    unsigned rh = i / span, jj = i % span;
    unsigned r = rh / heads, h = rh % heads;
    unsigned last = p.v[8] + r + 1u;
    unsigned j0 = 0u;
    if (p.v[9] != 0u && last > p.v[9]) j0 = last - p.v[9];
    unsigned j = j0 + jj;
    if (j >= last) return;
    unsigned g = h / p.v[3];
    unsigned qb = p.v[5] + r * p.v[4] + h * hd;
    unsigned kb = p.v[6] + g * hd * p.v[7] + j;
    float acc = 0.0f;
    for (unsigned t = 0; t < hd; t++) acc = fmaf(q[qb + t], keys[kb + t * p.v[7]], acc);
    float v = acc * pf(p, 10);
    if (p.v[11] != 0u) { float cap = pf(p, 11); v = tanh_k(v / cap) * cap; }
    s[p.v[13] + rh * p.v[7] + jj] = v;
}
extern "C" __global__ void causal_context(P p, const float* s, const float* vals, float* o) {
    unsigned i = flat();
    unsigned heads = p.v[1], hd = p.v[2], qd = heads * hd;
    if (i >= p.v[0] * qd) return;
    unsigned r = i / qd, col = i % qd, h = col / hd, d = col % hd;
    unsigned g = h / p.v[3];
    unsigned last = p.v[7] + r + 1u;
    unsigned j0 = 0u;
    if (p.v[8] != 0u && last > p.v[8]) j0 = last - p.v[8];
    unsigned srow = p.v[9] + (r * heads + h) * p.v[6];
    float acc = 0.0f;
    for (unsigned j = j0; j < last; j++) acc = fmaf(s[srow + j - j0], vals[p.v[5] + j * p.v[4] + g * hd + d], acc);
    o[p.v[10] + i] = acc;
}
extern "C" __global__ void pool(P p, const float* x, float* o) {
    unsigned i = flat();
    unsigned hidden = p.v[2], len = p.v[1];
    if (i >= hidden) return;
    unsigned base = p.v[4] + p.v[0] * hidden + i;
    float v = 0.0f;
    switch (p.v[3]) {
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
            v = v / (p.v[3] == 4u ? sqrtf((float)len) : (float)len);
    }
    o[p.v[5] + i] = v;
}
extern "C" __global__ void normalize(P p, float* x) {
    unsigned i = flat();
    if (i >= p.v[0]) return;
    unsigned base = p.v[2] + i * p.v[1];
    float ss = 0.0f;
    for (unsigned t = 0; t < p.v[1]; t++) ss = fmaf(x[base + t], x[base + t], ss);
    float n = fmaxf(sqrtf(ss), 1e-12f);
    for (unsigned t = 0; t < p.v[1]; t++) x[base + t] = x[base + t] / n;
}
extern "C" __global__ void copy2d(P p, const float* x, float* o) {
    unsigned i = flat();
    unsigned cols = p.v[1];
    if (i >= p.v[0] * cols) return;
    unsigned r = i / cols, c = i % cols;
    float v = x[p.v[4] + r * p.v[2] + c];
    if (p.v[6] != 0u) o[p.v[5] + c * p.v[0] + r] = v; else o[p.v[5] + r * p.v[3] + c] = v;
}
extern "C" __global__ void row_axpy(P p, float* x, const float* s, const float* y) {
    unsigned i = flat();
    unsigned w = p.v[1];
    if (i >= p.v[0] * w) return;
    unsigned r = i / w;
    x[p.v[2] + i] = fmaf(s[p.v[3] + r], y[p.v[4] + i], x[p.v[2] + i]);
}
extern "C" __global__ void divide_columns(P p, float* x) {
    unsigned i = flat();
    unsigned w = p.v[3];
    if (i >= p.v[0] * w) return;
    unsigned at = p.v[4] + (i / w) * p.v[1] + p.v[2] + i % w;
    x[at] = x[at] / pf(p, 5);
}
extern "C" __global__ void conv1d(P p, const float* x, const float* w, const float* b, float* o) {
    unsigned i = flat();
    unsigned len = p.v[1], kernel = p.v[3], cg = p.v[4], og = p.v[5];
    if (i >= len * og) return;
    unsigned t = i / og, j = i % og;
    unsigned pad = (kernel - 1u) / 2u;
    float acc = 0.0f;
    for (unsigned tap = 0; tap < kernel; tap++) {
        int src = (int)t + (int)tap - (int)pad;
        if (src >= 0 && (unsigned)src < len) {
            unsigned xr = p.v[8] + (p.v[0] + (unsigned)src) * p.v[2] + p.v[7] * cg;
            unsigned wr = j * kernel * cg + tap * cg;
            for (unsigned c = 0; c < cg; c++) acc = fmaf(w[wr + c], x[xr + c], acc);
        }
    }
    o[p.v[9] + (p.v[0] + t) * p.v[6] + p.v[7] * og + j] = acc + b[p.v[7] * og + j];
}
extern "C" __global__ void disentangled(P p, const float* qkv, const float* pk, const float* pq,
                                        const unsigned* idx, float* o) {
    unsigned i = flat();
    unsigned len = p.v[1], heads = p.v[2], hd = p.v[3];
    if (i >= heads * len * len) return;
    unsigned h = i / (len * len), qi = (i / len) % len, kj = i % len;
    unsigned hidden = heads * hd, stride = 3u * hidden;
    unsigned r = idx[qi + p.v[4] - 1u - kj];
    unsigned tb = r * hidden + h * hd;
    float v = 0.0f;
    if (p.v[7] != 0u) {
        unsigned q = p.v[5] + (p.v[0] + qi) * stride + h * hd;
        float acc = 0.0f;
        for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[q + t], pk[tb + t], acc);
        if (p.v[9] != 0u) acc = acc / pf(p, 10);
        v = acc;
    }
    if (p.v[8] != 0u) {
        unsigned k = p.v[5] + (p.v[0] + kj) * stride + hidden + h * hd;
        float acc = 0.0f;
        for (unsigned t = 0; t < hd; t++) acc = fmaf(qkv[k + t], pq[tb + t], acc);
        if (p.v[9] != 0u) acc = acc / pf(p, 10);
        v = v + acc;
    }
    o[p.v[6] + i] = v;
}
"#;

/// Every kernel's name (the same set as the WGSL kernels).
pub(super) const NAMES: &[&str] = &[
    "linear",
    "linear_q",
    "gather_q",
    "matmul",
    "layer_norm",
    "rms_norm",
    "unary",
    "binary",
    "glu",
    "gather",
    "rope",
    "attn_scores",
    "softmax",
    "attn_context",
    "kv_append",
    "causal_scores",
    "causal_context",
    "pool",
    "normalize",
    "copy2d",
    "row_axpy",
    "divide_columns",
    "conv1d",
    "disentangled",
];

/// The whole CUDA C source: the CPU's math constants, the prelude, every kernel.
pub fn source() -> String {
    let defines: String = super::math_constants()
        .iter()
        .map(|(name, v)| format!("#define {name} ({v:e}f)\n"))
        .collect();
    format!("{defines}{PRELUDE}{KERNELS}")
}
