//! DeBERTa (v1, `model_type: deberta`) and DeBERTa-v2/v3 (`deberta-v2`): disentangled
//! attention over relative positions, post-LayerNorm blocks, GELU feed-forward.
//!
//! - Embeddings: `(word + position?) + token_type?`, optional `embed_proj`, LayerNorm (the
//!   attention-mask multiply that follows is the identity on a packed batch: no pad rows).
//! - Attention scores: `q·k + c2p + p2c`, all over `sqrt(head_dim · scale_factor)` with
//!   `scale_factor = 1 + |pos_att_type|` (see [`attention`] for the terms and their order).
//!   v1 fuses q, k, v into `in_proj` (rows interleaved per head, no bias) with separate
//!   `q_bias` / `v_bias`, and clamps relative positions at `max_relative_positions`; v2 has
//!   `query_proj`/`key_proj`/`value_proj`, log buckets (`position_buckets`), `share_att_key`
//!   (the position projections reuse key/query), `norm_rel_ebd: layer_norm`, and an optional
//!   convolution after the first layer (`conv_kernel_size`, `conv_act`, `conv_groups`).
//! - The relative tables (`pos_proj(rel_embeddings)` etc.) depend only on weights: computed
//!   once at load, per layer.
//!
//! The batch is packed and every term is computed per (sequence, head) from that sequence's
//! own rows, relative positions depend only on `i - j`: a sequence's output never depends
//! on its neighbours.

mod attention;
mod config;

use super::bert::{BERT_EMBEDDINGS, BERT_FFN, BERT_POSITIONS};
use crate::backend::StoredRows;
use crate::backend::{AttnBias, DeviceMatrix, GpuCompute, GroupedConv, SeqAttn, SeqSpan, Tensor};
use crate::error::Result;
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, WeightSource};
use crate::models::{Batch, Encoder, Forward, Loaded};
use crate::nn::{LayerNorm, Linear};
use attention::{RelIndex, RelTables};
use config::{spec_of, ConvConfig, DebertaConfig};
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// Where DeBERTa checkpoints keep the encoder (`DebertaForMaskedLM` etc. nest it).
const PREFIXES: &[&str] = &["", "deberta.", "model.", "encoder_model."];
/// Hugging Face's DeBERTa (v1 and v2) layout in logical names. GGUF has no DeBERTa
/// vocabulary, so the BERT names (`io::source`) are extended in their style: `rel_embd` and
/// `rel_embd_norm` (the relative-position table and its v2 LayerNorm), `conv`/`conv_norm` (v2's
/// convolution), `token_embd_proj`; per layer v1's fused `attn_qkv` (`in_proj`) with its
/// whole-tensor biases `attn_q_bias`/`attn_v_bias`, and the position projections `attn_rel_k`
/// and `attn_rel_q` (v2's `pos_key_proj`/`pos_query_proj`, else v1's `pos_proj`/`pos_q_proj`).
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face DeBERTa",
    prefixes: PREFIXES,
    globals: &[
        BERT_EMBEDDINGS,
        BERT_POSITIONS,
        &[
            ("token_embd_proj", "embeddings.embed_proj"),
            ("rel_embd", "encoder.rel_embeddings"),
            ("rel_embd_norm", "encoder.LayerNorm"),
            ("conv", "encoder.conv.conv"),
            ("conv_norm", "encoder.conv.LayerNorm"),
        ],
    ],
    layer_prefix: "encoder.layer.{}.",
    layer: &[
        &[
            ("attn_q", "attention.self.query_proj"),
            ("attn_k", "attention.self.key_proj"),
            ("attn_v", "attention.self.value_proj"),
            ("attn_qkv", "attention.self.in_proj"),
            ("attn_q_bias", "attention.self.q_bias"),
            ("attn_v_bias", "attention.self.v_bias"),
            ("attn_rel_k", "attention.self.pos_key_proj"),
            ("attn_rel_k", "attention.self.pos_proj"),
            ("attn_rel_q", "attention.self.pos_query_proj"),
            ("attn_rel_q", "attention.self.pos_q_proj"),
            ("attn_output", "attention.output.dense"),
            ("attn_output_norm", "attention.output.LayerNorm"),
        ],
        BERT_FFN,
    ],
};
/// Disentangled-bias floats held at once (per chunk of sequences): 32 MiB.
const BIAS_BUDGET: usize = 1 << 23;

struct Layer {
    /// `[q | k | v]`: v2's `query_proj`, `key_proj`, `value_proj` fused, or v1's `in_proj`
    /// regrouped with bias `[q_bias | 0 | v_bias]`.
    qkv: Linear,
    rel: RelTables,
    attn_out: Linear,
    attn_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    out_norm: LayerNorm,
}

struct Embeddings {
    /// `[vocab_size, embedding_size]`
    word: Tensor,
    /// `[max_position_embeddings, embedding_size]` when `position_biased_input`.
    position: Option<Tensor>,
    /// `[type_vocab_size, embedding_size]` when `type_vocab_size > 0`.
    token_type: Option<Tensor>,
    /// `embedding_size -> hidden_size` when they differ.
    proj: Option<Linear>,
    norm: LayerNorm,
}

/// The v2 convolution after the first layer ([`GpuCompute::grouped_conv1d`]).
struct Conv {
    cfg: ConvConfig,
    /// Per group `[hidden/groups outputs, kernel · hidden/groups]`, columns `(tap, channel)`.
    groups: Vec<DeviceMatrix>,
    /// `[hidden]`
    bias: Tensor,
    norm: LayerNorm,
}

/// A DeBERTa / DeBERTa-v2 encoder.
pub struct DebertaModel {
    cfg: DebertaConfig,
    emb: Embeddings,
    layers: Vec<Layer>,
    conv: Option<Conv>,
    index: RelIndex,
    /// Disentangled-bias floats held at once ([`BIAS_BUDGET`]; smaller in tests).
    bias_budget: usize,
}

/// Loads a DeBERTa encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    let cfg = DebertaConfig::from_file(config)?;
    Ok(Box::new(DebertaModel::load(cfg, store, be)?))
}

impl DebertaModel {
    fn load(cfg: DebertaConfig, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let src = WeightSource::open(store, &LAYOUT)?;
        let w = src.weights();
        let g = |name: &str| format!("{}.weight", src.global(name));
        let h = cfg.hidden_size;
        let e = cfg.embedding_size;
        let eps = cfg.layer_norm_eps;
        let emb =
            Embeddings {
                word: be.upload_weights(w.get(&g("token_embd"), &[cfg.vocab_size, e])?),
                position: if cfg.position_biased_input {
                    Some(be.upload_weights(
                        w.get(&g("position_embd"), &[cfg.max_position_embeddings, e])?,
                    ))
                } else {
                    None
                },
                token_type: if cfg.type_vocab_size > 0 {
                    Some(be.upload_weights(w.get(&g("token_types"), &[cfg.type_vocab_size, e])?))
                } else {
                    None
                },
                proj: if e != h {
                    let t = w.get(&g("token_embd_proj"), &[h, e])?;
                    Some(Linear::from_parts(
                        be,
                        be.prepare_weights(&[StoredRows::F32(&t)], e)?,
                        None,
                    ))
                } else {
                    None
                },
                norm: LayerNorm::load(be, w, &src.global("token_embd_norm"), h, eps)?,
            };

        // The relative embedding table, LayerNorm'ed once (v2 `norm_rel_ebd`).
        let span = cfg.span();
        let rel_embeddings = if cfg.disentangled() {
            let mut t = be.upload(w.get(&g("rel_embd"), &[2 * span, h])?.to_vec());
            if cfg.norm_rel_ebd {
                LayerNorm::load(be, w, &src.global("rel_embd_norm"), h, eps)?
                    .forward(be, t.at_mut(..));
            }
            Some(t)
        } else {
            None
        };
        let scale = cfg.scale();

        let layers = (0..cfg.num_hidden_layers)
            .into_par_iter()
            .map(|i| {
                let t = |name: &str| src.layer(i, name);
                let ln = |name: &str| LayerNorm::load(be, w, &t(name), h, eps);
                let qkv = if cfg.v2 {
                    Linear::load_fused(be, w, &[&t("attn_q"), &t("attn_k"), &t("attn_v")], h, h)?
                } else {
                    load_in_proj(be, &src, i, h, cfg.num_attention_heads)?
                };
                let rel = match &rel_embeddings {
                    Some(table) => rel_tables(&cfg, be, &src, i, &qkv, table, scale)?,
                    None => RelTables {
                        pos_key: None,
                        pos_query: None,
                    },
                };
                Ok(Layer {
                    qkv,
                    rel,
                    attn_out: Linear::load(be, w, &t("attn_output"), h, h)?,
                    attn_norm: ln("attn_output_norm")?,
                    intermediate: Linear::load(be, w, &t("ffn_up"), h, cfg.intermediate_size)?,
                    output: Linear::load(be, w, &t("ffn_down"), cfg.intermediate_size, h)?,
                    out_norm: ln("layer_output_norm")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;

        let conv = match &cfg.conv {
            Some(c) => Some(load_conv(be, &src, c, h, eps)?),
            None => None,
        };
        let index = RelIndex::new(
            cfg.max_position_embeddings,
            span,
            cfg.position_buckets
                .map(|b| (b, cfg.max_relative_positions)),
        );
        let spec = spec_of(&cfg);
        Ok(Loaded::new(
            spec,
            w.prefix(),
            DebertaModel {
                cfg,
                emb,
                layers,
                conv,
                index,
                bias_budget: BIAS_BUDGET,
            },
        ))
    }
}

/// v1 `in_proj` (`[3·hidden, hidden]`, rows `[q_h | k_h | v_h]` per head) regrouped to
/// `[q | k | v]`, with `q_bias` and `v_bias` as the GEMM bias (added after the product, as
/// transformers adds them to `in_proj(x)`).
fn load_in_proj(
    be: &dyn GpuCompute,
    src: &WeightSource,
    layer: usize,
    h: usize,
    heads: usize,
) -> Result<Linear> {
    let (w, t) = (src.weights(), |name: &str| src.layer(layer, name));
    let hd = h / heads;
    let in_proj = w.get(&format!("{}.weight", t("attn_qkv")), &[3 * h, h])?;
    let mut rows = Vec::with_capacity(3 * h * h);
    for part in 0..3 {
        for head in 0..heads {
            let r0 = head * 3 * hd + part * hd;
            rows.extend_from_slice(&in_proj[r0 * h..(r0 + hd) * h]);
        }
    }
    let mut bias = w.get(&t("attn_q_bias"), &[h])?.to_vec();
    bias.extend(std::iter::repeat_n(0.0, h));
    bias.extend_from_slice(&w.get(&t("attn_v_bias"), &[h])?);
    Ok(Linear::from_parts(
        be,
        be.prepare_weights(&[StoredRows::F32(&rows)], h)?,
        Some(bias),
    ))
}

/// One layer's position projections of the relative table (on the backend, at load).
fn rel_tables(
    cfg: &DebertaConfig,
    be: &dyn GpuCompute,
    src: &WeightSource,
    layer: usize,
    qkv: &Linear,
    rel: &Tensor,
    scale: f32,
) -> Result<RelTables> {
    let h = cfg.hidden_size;
    let rows = rel.len() / h;
    let w = src.weights();
    let project = |name: &str, bias: bool| -> Result<Tensor> {
        let base = src.layer(layer, name);
        let wt = w.get(&format!("{base}.weight"), &[h, h])?;
        let p = Linear::from_parts(
            be,
            be.prepare_weights(&[StoredRows::F32(&wt)], h)?,
            if bias {
                Some(w.get(&format!("{base}.bias"), &[h])?.to_vec())
            } else {
                None
            },
        );
        let mut out = be.zeros(rows * h);
        p.forward(be, rel.view(), rows, out.at_mut(..));
        Ok(out)
    };
    // share_att_key: query_proj(rel) and key_proj(rel), through the fused q|k|v matrix
    // (each output element is computed as it would be alone). One spare row keeps the view
    // of each part `rows · 3h` long.
    let shared = if cfg.share_att_key {
        let mut out = be.zeros((rows + 1) * 3 * h);
        qkv.forward(be, rel.view(), rows, out.at_mut(..));
        Some(out)
    } else {
        None
    };
    let part = |all: &Tensor, which: usize| -> Tensor {
        let mut out = be.zeros(rows * h);
        let from = which * h;
        be.narrow(
            all.at(from..from + rows * 3 * h),
            rows,
            3 * h,
            h,
            out.at_mut(..),
        );
        out
    };
    let pos_key = if !cfg.c2p {
        None
    } else if let Some(s) = &shared {
        Some(part(s, 1))
    } else if cfg.v2 {
        Some(project("attn_rel_k", true)?)
    } else {
        Some(project("attn_rel_k", false)?)
    };
    let pos_query = if !cfg.p2c {
        None
    } else if let Some(s) = &shared {
        Some(part(s, 0))
    } else if cfg.v2 {
        Some(project("attn_rel_q", true)?)
    } else {
        // v1: `pos_query_layer /= scale` before the product
        let mut t = project("attn_rel_q", true)?;
        be.divide_columns(t.at_mut(..), h, 0, h, scale);
        Some(t)
    };
    Ok(RelTables { pos_key, pos_query })
}

/// `conv.weight` `[hidden, hidden/groups, kernel]` regrouped per group to GEMM rows over
/// im2col columns ordered `(tap, channel)`, as [`GpuCompute::grouped_conv1d`] takes them.
fn load_conv(
    be: &dyn GpuCompute,
    src: &WeightSource,
    c: &ConvConfig,
    h: usize,
    eps: f32,
) -> Result<Conv> {
    let (w, conv) = (src.weights(), src.global("conv"));
    let cg = h / c.groups;
    let k = c.kernel;
    let weight = w.get(&format!("{conv}.weight"), &[h, cg, k])?;
    let bias = w.get(&format!("{conv}.bias"), &[h])?;
    let groups = (0..c.groups)
        .map(|g| {
            let mut rows = Vec::with_capacity(cg * k * cg);
            for o in g * cg..(g + 1) * cg {
                for tap in 0..k {
                    for ch in 0..cg {
                        rows.push(weight[(o * cg + ch) * k + tap]);
                    }
                }
            }
            be.prepare_weights(&[StoredRows::F32(&rows)], k * cg)
        })
        .collect::<Result<_>>()?;
    Ok(Conv {
        cfg: c.clone(),
        groups,
        bias: be.upload(bias.to_vec()),
        norm: LayerNorm::load(be, w, &src.global("conv_norm"), h, eps)?,
    })
}

/// Splits `spans` into runs of sequences whose disentangled biases (`heads · len²` floats
/// each) fit `budget` together (at least one sequence per run); returns the runs and the
/// largest run's floats.
fn bias_runs(spans: &[SeqSpan], heads: usize, budget: usize) -> (Vec<Range<usize>>, usize) {
    let mut runs = Vec::new();
    let mut most = 0;
    let mut first = 0;
    while first < spans.len() {
        let mut last = first + 1;
        let mut used = spans[first].len * spans[first].len * heads;
        while last < spans.len() {
            let n = spans[last].len * spans[last].len * heads;
            if used + n > budget {
                break;
            }
            used += n;
            last += 1;
        }
        runs.push(first..last);
        most = most.max(used);
        first = last;
    }
    (runs, most)
}

/// The disentangled-bias runs of one forward pass and their buffer.
struct BiasBuffer {
    runs: Vec<Range<usize>>,
    bias: Tensor,
}

impl DebertaModel {
    /// `(word + position?) + token_type?` (in that order), `embed_proj`, LayerNorm.
    fn embed(
        &self,
        be: &dyn GpuCompute,
        seqs: &[&[u32]],
        type_ids: Option<&[&[u32]]>,
        total: usize,
    ) -> Tensor {
        let e = self.cfg.embedding_size;
        let ids: Vec<u32> = seqs.iter().flat_map(|s| s.iter().copied()).collect();
        let mut x = be.zeros(total * e);
        be.gather(&self.emb.word, e, &ids, x.at_mut(..));
        if let Some(p) = &self.emb.position {
            let pos: Vec<u32> = seqs.iter().flat_map(|s| 0..s.len() as u32).collect();
            be.gather_add(p, e, &pos, x.at_mut(..));
        }
        if let Some(tt) = &self.emb.token_type {
            let types: Vec<u32> = match type_ids {
                Some(t) => t.iter().flat_map(|s| s.iter().copied()).collect(),
                None => vec![0; total],
            };
            be.gather_add(tt, e, &types, x.at_mut(..));
        }
        let mut x = match &self.emb.proj {
            Some(p) => {
                let mut out = be.zeros(total * self.cfg.hidden_size);
                p.forward(be, x.view(), total, out.at_mut(..));
                out
            }
            None => x,
        };
        self.emb.norm.forward(be, x.at_mut(..));
        x
    }

    /// Disentangled self-attention of one layer into `ctx`; `qkv` is consumed (scaled).
    fn attention(
        &self,
        be: &dyn GpuCompute,
        layer: &Layer,
        qkv: &mut Tensor,
        spans: &[SeqSpan],
        bias: &mut Option<BiasBuffer>,
        ctx: &mut Tensor,
    ) {
        let c = &self.cfg;
        let h = c.hidden_size;
        let heads = c.num_attention_heads;
        let hd = c.head_dim();
        let scale = c.scale();
        if !c.v2 {
            // v1: query_layer / scale, then q·k, c2p from the scaled q
            be.divide_columns(qkv.at_mut(..), 3 * h, 0, h, scale);
        }
        let Some(BiasBuffer { runs, bias }) = bias else {
            if c.v2 {
                be.divide_columns(qkv.at_mut(..), 3 * h, h, h, scale);
            }
            let shape = SeqAttn {
                heads,
                head_dim: hd,
                scale: 1.0,
                bias: None,
            };
            be.attention(qkv.view(), spans, &shape, ctx.at_mut(..));
            return;
        };
        let terms = self
            .index
            .terms(&layer.rel, (heads, hd), c.v2.then_some(scale));
        for run in runs.iter() {
            let run = &spans[run.clone()];
            let used: usize = run.iter().map(|s| heads * s.len * s.len).sum();
            be.disentangled_bias(qkv.view(), run, &terms, bias.at_mut(..used));
            let rows = run[0].start..run[run.len() - 1].start + run[run.len() - 1].len;
            if c.v2 {
                // v2: q · (k / scale); p2c above used the unscaled k
                be.divide_columns(
                    qkv.at_mut(rows.start * 3 * h..rows.end * 3 * h),
                    3 * h,
                    h,
                    h,
                    scale,
                );
            }
            let dense = AttnBias::Dense { bias: &*bias };
            let shape = SeqAttn {
                heads,
                head_dim: hd,
                scale: 1.0,
                bias: Some(&dense),
            };
            be.attention(qkv.view(), run, &shape, ctx.at_mut(..));
        }
    }

    /// v2 ConvLayer: `LayerNorm(layer_out + act(conv(embeddings)))`, zero beyond each
    /// sequence's ends (the padded reference multiplies pad rows of its input by the mask).
    fn conv(
        &self,
        be: &dyn GpuCompute,
        conv: &Conv,
        input: &Tensor,
        spans: &[SeqSpan],
        x: &mut Tensor,
    ) {
        let h = self.cfg.hidden_size;
        let mut out = be.zeros(x.len());
        let grouped = GroupedConv {
            channels: h,
            kernel: conv.cfg.kernel,
            groups: &conv.groups,
            bias: &conv.bias,
        };
        be.grouped_conv1d(input.view(), spans, &grouped, out.at_mut(..));
        conv.cfg.act.apply(be, out.at_mut(..));
        be.add(out.at_mut(..), x.view());
        conv.norm.forward(be, out.at_mut(..));
        *x = out;
    }
}

impl Forward for DebertaModel {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let Batch {
            seqs,
            type_ids,
            ref spans,
            total,
        } = *batch;
        let c = &self.cfg;
        let h = c.hidden_size;
        let mut x = self.embed(be, seqs, type_ids, total);
        let conv_input = self.conv.as_ref().map(|_| {
            let mut t = be.zeros(x.len());
            be.copy(x.view(), t.at_mut(..));
            t
        });
        let mut bias = c.disentangled().then(|| {
            let (runs, most) = bias_runs(spans, c.num_attention_heads, self.bias_budget);
            BiasBuffer {
                runs,
                bias: be.zeros(most),
            }
        });

        let mut qkv = be.zeros(total * 3 * h);
        let mut ctx = be.zeros(total * h);
        let mut tmp = be.zeros(total * h);
        let mut inter = be.zeros(total * c.intermediate_size);
        for (li, layer) in self.layers.iter().enumerate() {
            layer.qkv.forward(be, x.view(), total, qkv.at_mut(..));
            self.attention(be, layer, &mut qkv, spans, &mut bias, &mut ctx);
            layer
                .attn_out
                .forward(be, ctx.view(), total, tmp.at_mut(..));
            be.add(tmp.at_mut(..), x.view());
            layer.attn_norm.forward(be, tmp.at_mut(..));
            std::mem::swap(&mut x, &mut tmp);

            layer
                .intermediate
                .forward(be, x.view(), total, inter.at_mut(..));
            be.activation(inter.at_mut(..), c.hidden_act.into());
            layer
                .output
                .forward(be, inter.view(), total, tmp.at_mut(..));
            be.add(tmp.at_mut(..), x.view());
            layer.out_norm.forward(be, tmp.at_mut(..));
            std::mem::swap(&mut x, &mut tmp);

            if li == 0 {
                if let (Some(conv), Some(input)) = (&self.conv, &conv_input) {
                    self.conv(be, conv, input, spans, &mut x);
                }
            }
        }
        Ok(x)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::CpuCompute;

    /// Splitting the batch into runs of sequences for the bias buffers changes no bit.
    #[test]
    fn bias_runs_do_not_change_results() {
        let dir =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/deberta_v2_conv");
        let store = WeightStore::open_dir(&dir).unwrap();
        let be = CpuCompute::new().unwrap();
        let cfg = DebertaConfig::from_file(&dir.join("config.json")).unwrap();
        let mut m = DebertaModel::load(cfg, &store, &be).unwrap();
        let seqs: Vec<Vec<u32>> = (1..12)
            .map(|n| (0..n * 5).map(|i| 4 + (i * 7 + n) as u32 % 70).collect())
            .collect();
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let whole = m.forward(&be, &refs, None).unwrap();
        let mut staging = Vec::new();
        let whole = be.read(whole.view(), &mut staging).to_vec();
        for budget in [1, 700, 5000] {
            m.model.bias_budget = budget;
            let split = m.forward(&be, &refs, None).unwrap();
            let split = be.read(split.view(), &mut staging);
            assert!(
                whole
                    .iter()
                    .zip(split)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "budget {budget}"
            );
        }
    }
}
