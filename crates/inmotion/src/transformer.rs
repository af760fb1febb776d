//! The four transformer families (lejepa, t_jepa, ts_jepa, cf_jepa): tokenizer → (t_jepa:
//! input projection) → (positional) → pre-norm encoder layers → final LayerNorm → pool → tail,
//! every step a backend op (kin-infer's seam) over kin-infer's shared blocks. Names follow
//! specs/inmotion-artifact.md; every buffer is allocated once, in [`Scratch`].
//!
//! Load-time rewrites that leave the function unchanged (its rounding differs from PyTorch's
//! order only at the last bits; the goldens' tolerance covers it, and these bits are pinned by
//! `inmotion::NUMERICS_VERSION`):
//! - t_jepa's tokenizer and input projection are one affine map per token,
//!   `P·(W[j]·v_j + B[j] + E[j]) + p = v_j·(P·W[j]) + (P·(B[j] + E[j]) + p)`: computed at
//!   load, so a window costs one fused multiply-add per feature instead of a GEMM.
//! - ts_jepa's patch convolution takes its weight's columns reordered `(tap, channel)`, so a
//!   patch is the window's contiguous rows (no gather).
//! - The tail's BatchNorm folds into `head.3` (see [`BatchNorm::fold_before`]).

use crate::error::{Error, Result};
use crate::meta::{n_tokens, Family, Meta, TransformerHparams};
use crate::nn::{linear, load_host, load_linear, load_matrix, load_norm, BatchNorm};
use crate::weights::Store;
use kin_infer_core::backend::{Act, AttnShape, Backend, MatmulShape, SeqSpan, Tensor};
use kin_infer_core::nn::block::{Block, BlockBuffers, Mlp, Residual};
use kin_infer_core::nn::ffn::FfnAct;
use kin_infer_core::nn::{LayerNorm, Linear, Norm};
use kin_infer_core::{Pooling, PoolingMode};

enum Tokenizer {
    /// Linear(C → d) per timestep.
    Lejepa(Linear),
    /// `x_j = v_j · a[j] + c[j]` (`v` = 1 for the register tokens, then the window's values).
    TJepa { a: Tensor, c: Tensor },
    /// Conv1d(C → d, kernel = stride = patch) as a Linear over `[patch · C]` patches.
    TsJepa(Linear),
    /// Linear(T → d) per channel, over the transposed window.
    CfJepa(Linear),
}

enum Pool {
    /// Mean over tokens `skip..`.
    Mean { skip: usize, pooling: Pooling },
    /// `softmax_t(x_t · w + b)`-weighted sum.
    Attention(Linear),
}

pub struct Transformer {
    family: Family,
    n_tokens: usize,
    d: usize,
    n_reg: usize,
    tokenizer: Tokenizer,
    pos: Option<Tensor>,
    /// PyTorch's pre-norm `TransformerEncoderLayer` as the shared block, run
    /// bidirectionally: norm1, in_proj, attention, out_proj; norm2, linear1, GELU, linear2.
    layers: Vec<Block>,
    norm: LayerNorm,
    pool: Pool,
    head0: Linear,
    head3: Linear,
    s: Scratch,
}

/// Run-state, allocated once. Shapes in comments (n = n_tokens, d = d_model).
struct Scratch {
    input: Tensor,       // [T, C] the window; t_jepa: [n_reg + T·C] values, ones first
    tok_in: Tensor,      // cf_jepa: [C, T] the transposed window
    block: BlockBuffers, // the layers' (x: [n, d] residual stream, qkv: [n, max(3d, ff)])
    scores: Tensor,      // [n] attention-pool weights
    pooled: Tensor,      // [d]
    hid: Tensor,         // [head_hidden]
}

/// `out[j] = P · v[j]` for rows `v[j]` of `d`, `P` `[d, d]` row-major, in f64.
fn project(p: &[f32], v: &[f64], d: usize) -> Vec<f64> {
    v.chunks_exact(d)
        .flat_map(|row| {
            p.chunks_exact(d)
                .map(move |pr| pr.iter().zip(row).map(|(&a, &b)| a as f64 * b).sum())
        })
        .collect()
}

impl Transformer {
    pub fn load(be: &dyn Backend, st: &Store, meta: &Meta, h: &TransformerHparams) -> Result<Self> {
        let (family, t, c) = (meta.family, meta.seq_len, meta.in_channels);
        let d = h.d_model;
        let n = n_tokens(family, h, t, c);
        let tk = "encoder.tokenizer";
        let mut input = be.zeros(t * c);
        let mut tok_in = be.zeros(0);
        let tokenizer = match family {
            Family::Lejepa => {
                Tokenizer::Lejepa(load_linear(be, st, &format!("{tk}.proj"), &[d, c])?)
            }
            Family::TJepa => {
                let tc = t * c;
                let nr = h.n_reg;
                let w = st.get(&format!("{tk}.weight"), &[n, d])?;
                let b = st.get(&format!("{tk}.bias"), &[tc, d])?;
                let e = st.get(&format!("{tk}.feat_idx_embed.weight"), &[tc, d])?;
                st.require_unused(&format!("{tk}.reg_tokens.tokens"), &[nr, d])?;
                let (p, pb) = load_host(st, "encoder.input_proj", &[d, d])?;
                let w64: Vec<f64> = w.iter().map(|&v| v as f64).collect();
                let mut be64 = vec![0.0f64; n * d];
                for (o, (&b, &e)) in be64[nr * d..].iter_mut().zip(b.iter().zip(&e)) {
                    *o = b as f64 + e as f64;
                }
                let a = project(&p, &w64, d);
                let cst = project(&p, &be64, d);
                let a: Vec<f32> = a.iter().map(|&v| v as f32).collect();
                let cst: Vec<f32> = cst
                    .iter()
                    .enumerate()
                    .map(|(i, &v)| (v + pb[i % d] as f64) as f32)
                    .collect();
                let mut ones = vec![1.0f32; n];
                ones[nr..].fill(0.0);
                input = be.upload(ones);
                Tokenizer::TJepa {
                    a: be.upload(a),
                    c: be.upload(cst),
                }
            }
            Family::TsJepa => {
                let p = h.patch_size;
                let (w, b) = load_host(st, &format!("{tk}.proj"), &[d, c, p])?;
                // [d, C, patch] → columns (tap, channel), the window's own row order.
                let mut wr = vec![0.0f32; w.len()];
                for o in 0..d {
                    for ch in 0..c {
                        for kk in 0..p {
                            wr[o * c * p + kk * c + ch] = w[o * c * p + ch * p + kk];
                        }
                    }
                }
                Tokenizer::TsJepa(linear(be, &wr, b, c * p))
            }
            Family::CfJepa => {
                tok_in = be.zeros(t * c);
                Tokenizer::CfJepa(load_linear(be, st, &format!("{tk}.proj"), &[d, t])?)
            }
            Family::Sigreg => unreachable!("sigreg is not a transformer"),
        };
        let pos = match family {
            Family::TJepa => None,
            _ => Some(be.upload(st.get("encoder.pos_embed", &[1, n, d])?)),
        };
        let eps = h.layer_norm_eps;
        let ff = h.dim_feedforward;
        let layers = (0..h.num_layers)
            .map(|i| {
                let p = format!("encoder.transformer.layers.{i}");
                let qkv_w = load_matrix(
                    be,
                    st,
                    &format!("{p}.self_attn.in_proj_weight"),
                    &[3 * d, d],
                )?;
                let qkv_b = st.get(&format!("{p}.self_attn.in_proj_bias"), &[3 * d])?;
                Ok(Block {
                    attn_norm: Norm::Layer(load_norm(be, st, &format!("{p}.norm1"), d, eps)?),
                    qkv: Linear::from_parts(be, qkv_w, Some(qkv_b)),
                    o: load_linear(be, st, &format!("{p}.self_attn.out_proj"), &[d, d])?,
                    mlp: Mlp::Plain {
                        fc1: load_linear(be, st, &format!("{p}.linear1"), &[ff, d])?,
                        act: FfnAct::GeluErf,
                        fc2: load_linear(be, st, &format!("{p}.linear2"), &[d, ff])?,
                        width: ff,
                    },
                    residual: Residual::Sequential {
                        ffn_norm: Norm::Layer(load_norm(be, st, &format!("{p}.norm2"), d, eps)?),
                    },
                    attn: AttnShape {
                        heads: h.n_heads,
                        kv_heads: h.n_heads,
                        head_dim: d / h.n_heads,
                        scale: 1.0 / ((d / h.n_heads) as f32).sqrt(),
                        window: None,
                        softcap: None,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = load_norm(be, st, "encoder.norm", d, eps)?;
        let pool = match family {
            Family::Lejepa => Pool::Attention(load_linear(be, st, "pool.attn", &[1, d])?),
            Family::TJepa => Pool::Mean {
                skip: h.n_reg,
                pooling: Pooling::new(vec![PoolingMode::Mean]),
            },
            _ => Pool::Mean {
                skip: 0,
                pooling: Pooling::new(vec![PoolingMode::Mean]),
            },
        };
        let hh = h.head_hidden;
        let head0 = load_linear(be, st, "head.0", &[hh, d])?;
        let (mut w3, mut b3) = load_host(st, "head.3", &[meta.num_classes, hh])?;
        if matches!(family, Family::Lejepa | Family::CfJepa) {
            BatchNorm::load(st, "head.2", hh, h.batch_norm_eps)?.fold_before(&mut w3, &mut b3);
        }
        let head3 = linear(be, &w3, b3, hh);
        if n == 0 || (matches!(pool, Pool::Mean { skip, .. } if skip >= n)) {
            return Err(Error::field(
                &meta.path,
                "hparams",
                "the window makes no tokens to pool",
            ));
        }
        let s = Scratch {
            input,
            tok_in,
            block: BlockBuffers::new(be, n, d, d, (3 * d).max(ff), 0),
            scores: be.zeros(n),
            pooled: be.zeros(d),
            hid: be.zeros(hh),
        };
        Ok(Transformer {
            family,
            n_tokens: n,
            d,
            n_reg: h.n_reg,
            tokenizer,
            pos,
            layers,
            norm,
            pool,
            head0,
            head3,
            s,
        })
    }

    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// `x`: one window `[seq_len, in_channels]`; writes `logits`.
    pub fn forward(&mut self, be: &dyn Backend, x: &[f32], logits: &mut Tensor) {
        let (n, d) = (self.n_tokens, self.d);
        let s = &mut self.s;
        // 1-3. tokens (+ input projection) (+ positional)
        match &self.tokenizer {
            Tokenizer::Lejepa(proj) => {
                be.write(x, s.input.at_mut(..));
                proj.forward(be, s.input.view(), n, s.block.x.at_mut(..));
            }
            Tokenizer::TJepa { a, c } => {
                be.write(x, s.input.at_mut(self.n_reg..));
                be.copy(c.view(), s.block.x.at_mut(..));
                be.row_axpy(s.block.x.at_mut(..), d, s.input.view(), a.view());
            }
            Tokenizer::TsJepa(proj) => {
                be.write(x, s.input.at_mut(..));
                proj.forward(be, s.input.view(), n, s.block.x.at_mut(..));
            }
            Tokenizer::CfJepa(proj) => {
                be.write(x, s.input.at_mut(..));
                let t = s.input.len() / n;
                be.transpose(s.input.view(), t, n, s.tok_in.at_mut(..));
                proj.forward(be, s.tok_in.view(), n, s.block.x.at_mut(..));
            }
        }
        if let Some(pos) = &self.pos {
            be.add(s.block.x.at_mut(..), pos.view());
        }
        // 4. encoder layers (pre-norm)
        let seq = [SeqSpan { start: 0, len: n }];
        for l in &self.layers {
            l.forward_bidirectional(be, &mut s.block, (n, d), &seq, None);
        }
        // 5. final norm
        self.norm.forward(be, s.block.x.at_mut(..));
        // 6. pool
        match &self.pool {
            Pool::Mean { skip, pooling } => {
                let span = [SeqSpan {
                    start: *skip,
                    len: n - skip,
                }];
                be.pool(s.block.x.view(), &span, d, pooling, s.pooled.at_mut(..));
            }
            Pool::Attention(score) => {
                score.forward(be, s.block.x.view(), n, s.scores.at_mut(..));
                be.softmax(s.scores.at_mut(..), n);
                let shape = MatmulShape {
                    m: 1,
                    k: n,
                    n: d,
                    lda: n,
                    ldb: d,
                };
                be.matmul(
                    s.scores.view(),
                    s.block.x.view(),
                    shape,
                    s.pooled.at_mut(..),
                );
            }
        }
        // 7. tail (head.2's BatchNorm is folded into head.3)
        self.head0.forward(be, s.pooled.view(), 1, s.hid.at_mut(..));
        be.activation(s.hid.at_mut(..), Act::GeluErf);
        self.head3.forward(be, s.hid.view(), 1, logits.at_mut(..));
    }

    pub fn family(&self) -> Family {
        self.family
    }
}
