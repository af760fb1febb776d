//! The four transformer families (lejepa, t_jepa, ts_jepa, cf_jepa): tokenizer → (t_jepa:
//! input projection) → (positional) → pre-norm encoder layers → final LayerNorm → pool → tail.
//! Names follow specs/inmotion-artifact.md; every buffer is allocated once, in [`Scratch`].

use crate::attn_gemm::SmallGemm;
use crate::error::{Error, Result};
use crate::meta::{Family, Meta, TransformerHparams};
use crate::nn::{BatchNorm, Linear, Norm};
use crate::weights::Store;
use kin_infer::kernels::Kernels;

enum Tokenizer {
    /// Linear(C → d) per timestep.
    Lejepa(Linear),
    /// `tok[j] = W[j]·v_j + B'[j]`, then `+ E'[j]`; then `encoder.input_proj`.
    TJepa {
        w: Vec<f32>,
        b: Vec<f32>,
        e: Vec<f32>,
        input_proj: Linear,
    },
    /// Conv1d(C → d, kernel = stride = patch) as a Linear over `[C·patch]` patches.
    TsJepa { proj: Linear, patch: usize },
    /// Linear(T → d) per channel.
    CfJepa(Linear),
}

struct Layer {
    norm1: Norm,
    qkv: Linear,
    out_proj: Linear,
    norm2: Norm,
    linear1: Linear,
    linear2: Linear,
}

enum Pool {
    /// Mean over tokens `skip..`.
    Mean { skip: usize },
    /// `softmax_t(x_t · w + b)`-weighted sum.
    Attention { w: Vec<f32>, b: f32 },
}

pub struct Transformer {
    family: Family,
    seq_len: usize,
    channels: usize,
    n_tokens: usize,
    d: usize,
    heads: usize,
    tokenizer: Tokenizer,
    pos: Option<Vec<f32>>,
    layers: Vec<Layer>,
    norm: Norm,
    pool: Pool,
    head0: Linear,
    bn: Option<BatchNorm>,
    head3: Linear,
    gemm: SmallGemm,
    s: Scratch,
}

/// Run-state, allocated once. Shapes in comments (n = n_tokens, d = d_model).
struct Scratch {
    tok_in: Vec<f32>, // [n, tokenizer input width]
    x: Vec<f32>,      // [n, d] residual stream
    h: Vec<f32>,      // [n, d] normed / attention output
    tmp: Vec<f32>,    // [n, d]
    qkv: Vec<f32>,    // [n, 3d]
    ff: Vec<f32>,     // [n, ff]
    scores: Vec<f32>, // [n, n] one head's attention scores / probabilities
    kt: Vec<f32>,     // [head_dim, n] one head's keys, transposed
    pooled: Vec<f32>, // [d]
    hid: Vec<f32>,    // [head_hidden]
}

/// Number of tokens a family makes from a `[seq_len, in_channels]` window.
pub fn n_tokens(family: Family, h: &TransformerHparams, seq_len: usize, channels: usize) -> usize {
    match family {
        Family::Lejepa => seq_len,
        Family::TJepa => h.n_reg + seq_len * channels,
        Family::TsJepa => seq_len / h.patch_size,
        _ => channels,
    }
}

impl Transformer {
    pub fn load(k: &Kernels, st: &Store, meta: &Meta, h: &TransformerHparams) -> Result<Self> {
        let (family, t, c) = (meta.family, meta.seq_len, meta.in_channels);
        let d = h.d_model;
        let n = n_tokens(family, h, t, c);
        let tk = "encoder.tokenizer";
        let (tokenizer, tok_width) = match family {
            Family::Lejepa => (
                Tokenizer::Lejepa(Linear::load(k, st, &format!("{tk}.proj"), &[d, c])?),
                c,
            ),
            Family::TJepa => {
                let tc = t * c;
                let w = st.get(&format!("{tk}.weight"), &[n, d])?;
                let mut b = vec![0.0; n * d];
                b[h.n_reg * d..].copy_from_slice(&st.get(&format!("{tk}.bias"), &[tc, d])?);
                let mut e = vec![0.0; n * d];
                e[h.n_reg * d..]
                    .copy_from_slice(&st.get(&format!("{tk}.feat_idx_embed.weight"), &[tc, d])?);
                st.require_unused(&format!("{tk}.reg_tokens.tokens"), &[h.n_reg, d])?;
                let input_proj = Linear::load(k, st, "encoder.input_proj", &[d, d])?;
                (
                    Tokenizer::TJepa {
                        w,
                        b,
                        e,
                        input_proj,
                    },
                    d,
                )
            }
            Family::TsJepa => {
                let p = h.patch_size;
                (
                    Tokenizer::TsJepa {
                        proj: Linear::load(k, st, &format!("{tk}.proj"), &[d, c, p])?,
                        patch: p,
                    },
                    c * p,
                )
            }
            Family::CfJepa => (
                Tokenizer::CfJepa(Linear::load(k, st, &format!("{tk}.proj"), &[d, t])?),
                t,
            ),
            Family::Sigreg => unreachable!("sigreg is not a transformer"),
        };
        let pos = match family {
            Family::TJepa => None,
            _ => Some(st.get("encoder.pos_embed", &[1, n, d])?),
        };
        let eps = h.layer_norm_eps;
        let layers = (0..h.num_layers)
            .map(|i| {
                let p = format!("encoder.transformer.layers.{i}");
                let ff = h.dim_feedforward;
                let qkv_w = st.get(&format!("{p}.self_attn.in_proj_weight"), &[3 * d, d])?;
                let qkv_b = st.get(&format!("{p}.self_attn.in_proj_bias"), &[3 * d])?;
                Ok(Layer {
                    norm1: Norm::load(st, &format!("{p}.norm1"), d, eps)?,
                    qkv: Linear {
                        w: k.pack_rows(&qkv_w, 3 * d, d, d),
                        b: qkv_b,
                        out: 3 * d,
                    },
                    out_proj: Linear::load(k, st, &format!("{p}.self_attn.out_proj"), &[d, d])?,
                    norm2: Norm::load(st, &format!("{p}.norm2"), d, eps)?,
                    linear1: Linear::load(k, st, &format!("{p}.linear1"), &[ff, d])?,
                    linear2: Linear::load(k, st, &format!("{p}.linear2"), &[d, ff])?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = Norm::load(st, "encoder.norm", d, eps)?;
        let pool = match family {
            Family::Lejepa => {
                let w = st.get("pool.attn.weight", &[1, d])?;
                let b = st.get("pool.attn.bias", &[1])?[0];
                Pool::Attention { w, b }
            }
            Family::TJepa => Pool::Mean { skip: h.n_reg },
            _ => Pool::Mean { skip: 0 },
        };
        let hh = h.head_hidden;
        let head0 = Linear::load(k, st, "head.0", &[hh, d])?;
        let bn = match family {
            Family::Lejepa | Family::CfJepa => {
                Some(BatchNorm::load(st, "head.2", hh, h.batch_norm_eps)?)
            }
            _ => None,
        };
        let head3 = Linear::load(k, st, "head.3", &[meta.num_classes, hh])?;
        if n == 0 || (matches!(pool, Pool::Mean { skip } if skip >= n)) {
            return Err(Error::field(
                &meta.path,
                "hparams",
                "the window makes no tokens to pool",
            ));
        }
        let s = Scratch {
            tok_in: vec![0.0; n * tok_width],
            x: vec![0.0; n * d],
            h: vec![0.0; n * d],
            tmp: vec![0.0; n * d],
            qkv: vec![0.0; n * 3 * d],
            ff: vec![0.0; n * h.dim_feedforward],
            scores: vec![0.0; n * n],
            kt: vec![0.0; n * d / h.n_heads],
            pooled: vec![0.0; d],
            hid: vec![0.0; hh],
        };
        Ok(Transformer {
            family,
            seq_len: t,
            channels: c,
            n_tokens: n,
            d,
            heads: h.n_heads,
            tokenizer,
            pos,
            layers,
            norm,
            pool,
            head0,
            bn,
            head3,
            gemm: crate::attn_gemm::for_kernels(k),
            s,
        })
    }

    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// `x`: one window `[seq_len, in_channels]`; writes `logits`.
    pub fn forward(&mut self, k: &Kernels, x: &[f32], logits: &mut [f32]) {
        let (n, d, t, c) = (self.n_tokens, self.d, self.seq_len, self.channels);
        let s = &mut self.s;
        // 1-3. tokens (+ input projection) (+ positional)
        match &self.tokenizer {
            Tokenizer::Lejepa(proj) => proj.run(k, x, c, t, &mut s.x, d),
            Tokenizer::TJepa {
                w,
                b,
                e,
                input_proj,
            } => {
                let n_reg = n - t * c;
                for j in 0..n {
                    let v = if j < n_reg { 1.0 } else { x[j - n_reg] };
                    let r = j * d..(j + 1) * d;
                    let out = &mut s.tok_in[r.clone()];
                    for (((o, &w), &b), &e) in out
                        .iter_mut()
                        .zip(&w[r.clone()])
                        .zip(&b[r.clone()])
                        .zip(&e[r])
                    {
                        *o = (w * v + b) + e;
                    }
                }
                input_proj.run(k, &s.tok_in, d, n, &mut s.x, d);
            }
            Tokenizer::TsJepa { proj, patch } => {
                let p = *patch;
                for tok in 0..n {
                    let row = &mut s.tok_in[tok * c * p..(tok + 1) * c * p];
                    for ch in 0..c {
                        for kk in 0..p {
                            row[ch * p + kk] = x[(tok * p + kk) * c + ch];
                        }
                    }
                }
                proj.run(k, &s.tok_in, c * p, n, &mut s.x, d);
            }
            Tokenizer::CfJepa(proj) => {
                for ch in 0..c {
                    for ti in 0..t {
                        s.tok_in[ch * t + ti] = x[ti * c + ch];
                    }
                }
                proj.run(k, &s.tok_in, t, n, &mut s.x, d);
            }
        }
        if let Some(pos) = &self.pos {
            k.add(&mut s.x, pos);
        }
        // 4. encoder layers
        let hd = d / self.heads;
        let scale = 1.0 / (hd as f32).sqrt();
        for l in &self.layers {
            s.h.copy_from_slice(&s.x);
            l.norm1.rows(k, &mut s.h);
            l.qkv.run(k, &s.h, d, n, &mut s.qkv, 3 * d);
            for head in 0..self.heads {
                let off = head * hd;
                // kt = K_hᵀ [hd, n]; scores = Q_h · kt [n, n]; softmax rows; O_h = P · V_h.
                for j in 0..n {
                    let kr = &s.qkv[j * 3 * d + d + off..j * 3 * d + d + off + hd];
                    for (c, &v) in kr.iter().enumerate() {
                        s.kt[c * n + j] = v;
                    }
                }
                (self.gemm)(&s.qkv[off..], 3 * d, n, hd, &s.kt, n, n, &mut s.scores, n);
                for row in s.scores.chunks_exact_mut(n) {
                    k.softmax_scaled(row, scale);
                }
                (self.gemm)(
                    &s.scores,
                    n,
                    n,
                    n,
                    &s.qkv[2 * d + off..],
                    3 * d,
                    hd,
                    &mut s.h[off..],
                    d,
                );
            }
            l.out_proj.run(k, &s.h, d, n, &mut s.tmp, d);
            k.add(&mut s.x, &s.tmp);
            s.h.copy_from_slice(&s.x);
            l.norm2.rows(k, &mut s.h);
            let ff = l.linear1.out;
            l.linear1.run(k, &s.h, d, n, &mut s.ff, ff);
            k.gelu_erf(&mut s.ff);
            l.linear2.run(k, &s.ff, ff, n, &mut s.tmp, d);
            k.add(&mut s.x, &s.tmp);
        }
        // 5. final norm
        self.norm.rows(k, &mut s.x);
        // 6. pool
        s.pooled.fill(0.0);
        match &self.pool {
            Pool::Mean { skip } => {
                for row in s.x.chunks_exact(d).skip(*skip) {
                    for (p, &v) in s.pooled.iter_mut().zip(row) {
                        *p += v;
                    }
                }
                let cnt = (n - skip) as f32;
                for p in s.pooled.iter_mut() {
                    *p /= cnt;
                }
            }
            Pool::Attention { w, b } => {
                for (j, row) in s.x.chunks_exact(d).enumerate() {
                    s.scores[j] = k.dot(row, w) + b;
                }
                k.softmax(&mut s.scores[..n]);
                for (j, row) in s.x.chunks_exact(d).enumerate() {
                    let wj = s.scores[j];
                    for (p, &v) in s.pooled.iter_mut().zip(row) {
                        *p += wj * v;
                    }
                }
            }
        }
        // 7. tail
        let hh = self.head0.out;
        self.head0.run(k, &s.pooled, d, 1, &mut s.hid, hh);
        k.gelu_erf(&mut s.hid);
        if let Some(bn) = &self.bn {
            bn.rows(&mut s.hid);
        }
        self.head3.run(k, &s.hid, hh, 1, logits, self.head3.out);
    }

    pub fn family(&self) -> Family {
        self.family
    }
}
