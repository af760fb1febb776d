//! T5 and mT5 encoders (`T5EncoderModel`, `MT5EncoderModel`, the encoder half of a full
//! checkpoint): pre-norm blocks with T5's RMSNorm (no mean, no bias), unscaled attention over
//! an inner width `d_kv * num_heads` independent of `d_model`, a bucketed relative position
//! bias computed by the first block and shared by every block, a `relu` / `gelu` or gated
//! (`gated-gelu` = GeGLU with the tanh GELU, `gated-relu`, `gated-silu`) feed-forward without
//! biases, and a final RMSNorm.
//!
//! The batch is packed (no padding rows); the position bias is an [`AttnBias::Relative`]: a
//! per-head table over relative distance built once per forward, so a query row gets exactly
//! the values its own sequence would give it alone.

use crate::backend::{AttnBias, AttnShape, GpuCompute, Tensor};
use crate::error::{InferError, Result};
use crate::io::config::ModelArchitecture;
use crate::io::config_fields::ConfigFields;
use crate::io::safetensors::WeightStore;
use crate::io::source::{Layout, WeightSource};
use crate::models::{Batch, Encoder, EncoderSpec, Forward, Loaded};
use crate::nn::block::{Block, BlockBuffers, Mlp, Residual};
use crate::nn::ffn::{FfnAct, GatedFfn};
use crate::nn::{Linear, Norm, RmsNorm};
use rayon::prelude::*;
use std::path::Path;

/// Where a checkpoint may nest the encoder (`T5EncoderModel` and full `T5Model` /
/// `T5ForConditionalGeneration` checkpoints use no prefix).
const PREFIXES: &[&str] = &["", "t5.", "model.", "transformer."];
/// Hugging Face's T5 encoder layout in logical names (GGUF's T5 encoder vocabulary,
/// `enc.blk.{i}.*`, `io::source`): `attn_rel_b` is the relative-position bias table (block 0
/// only); a gated FFN is `ffn_gate` (`wi_0`) and `ffn_up` (`wi_1`), a plain one `ffn_up` (`wi`).
/// Tied checkpoints hold the embedding as `shared`; some keep only the encoder's copy.
static LAYOUT: Layout = Layout {
    name: "safetensors, Hugging Face T5 encoder",
    prefixes: PREFIXES,
    globals: &[&[
        ("token_embd", "shared"),
        ("token_embd", "encoder.embed_tokens"),
        ("output_norm", "encoder.final_layer_norm"),
    ]],
    layer_prefix: "encoder.block.{}.",
    layer: &[&[
        ("attn_norm", "layer.0.layer_norm"),
        ("attn_q", "layer.0.SelfAttention.q"),
        ("attn_k", "layer.0.SelfAttention.k"),
        ("attn_v", "layer.0.SelfAttention.v"),
        ("attn_output", "layer.0.SelfAttention.o"),
        (
            "attn_rel_b",
            "layer.0.SelfAttention.relative_attention_bias",
        ),
        ("ffn_norm", "layer.1.layer_norm"),
        ("ffn_gate", "layer.1.DenseReluDense.wi_0"),
        ("ffn_up", "layer.1.DenseReluDense.wi_1"),
        ("ffn_up", "layer.1.DenseReluDense.wi"),
        ("ffn_down", "layer.1.DenseReluDense.wo"),
    ]],
};
/// Sequence limit when the config names none (T5 has no position table; 512 is the limit the
/// T5 tokenizers and sentence-t5 use).
const DEFAULT_MAX_LEN: usize = 512;

/// A validated T5 / mT5 encoder config.
#[derive(Clone, Debug)]
struct T5Config {
    architecture: ModelArchitecture,
    vocab_size: usize,
    d_model: usize,
    d_kv: usize,
    num_heads: usize,
    d_ff: usize,
    num_layers: usize,
    num_buckets: usize,
    max_distance: usize,
    eps: f32,
    act: FfnAct,
    gated: bool,
    feed_forward_proj: String,
    pad_token_id: u32,
    max_len: usize,
    dtype: Option<String>,
}

impl T5Config {
    fn from_file(path: &Path) -> Result<Self> {
        let value: serde_json::Value = crate::io::read_json(path)?;
        let f = ConfigFields::new(&value, path)?;
        let architecture = ModelArchitecture::detect(path)?;
        // transformers' attribute_map aliases are accepted after the T5 names.
        let vocab_size = f.dim(&["vocab_size"], None)?;
        let d_model = f.dim(&["d_model", "hidden_size"], None)?;
        let d_kv = f.dim(&["d_kv", "head_dim"], None)?;
        let num_heads = f.dim(&["num_heads", "num_attention_heads"], None)?;
        let d_ff = f.dim(&["d_ff"], None)?;
        let num_layers = f.dim(&["num_layers", "num_hidden_layers"], None)?;
        let num_buckets = f.dim(&["relative_attention_num_buckets"], Some(32))?;
        let max_distance = f.dim(&["relative_attention_max_distance"], Some(128))?;
        let eps = f.eps("layer_norm_epsilon", 1e-6)?;
        let proj = f
            .opt_str("feed_forward_proj")?
            .unwrap_or("relu")
            .to_string();
        let parts: Vec<&str> = proj.split('-').collect();
        let gated = parts[0] == "gated";
        if parts.len() > 2 || (parts.len() == 2 && !gated) {
            return Err(f.err(
                "feed_forward_proj",
                format!("`{proj}` is not of the form `ACT` or `gated-ACT`"),
            ));
        }
        let act = match (proj.as_str(), *parts.last().unwrap_or(&"")) {
            // transformers maps `gated-gelu` to gelu_new for backward compatibility.
            ("gated-gelu", _) => FfnAct::GeluTanh,
            (_, "relu") => FfnAct::Relu,
            (_, "gelu") => FfnAct::GeluErf,
            (_, "gelu_new") | (_, "gelu_pytorch_tanh") => FfnAct::GeluTanh,
            (_, "silu") | (_, "swish") => FfnAct::Silu,
            (_, other) => {
                return Err(f.err(
                    "feed_forward_proj",
                    format!("unsupported activation `{other}` (supported: relu, gelu, gelu_new, gelu_pytorch_tanh, silu, each optionally `gated-`)"),
                ))
            }
        };
        // Buckets: half per direction, half of those exact, the rest logarithmic up to
        // max_distance, which must lie past the exact range.
        let max_exact = num_buckets / 4;
        if num_buckets < 4 {
            return Err(f.err(
                "relative_attention_num_buckets",
                format!("{num_buckets} is too small (at least 4)"),
            ));
        }
        if max_distance <= max_exact {
            return Err(f.err(
                "relative_attention_max_distance",
                format!("{max_distance} must exceed the {max_exact} exact buckets per direction"),
            ));
        }
        if value.get("is_decoder") == Some(&serde_json::Value::Bool(true)) {
            return Err(InferError::Unsupported(format!(
                "{}: a T5 decoder config (is_decoder: true); only encoders are supported",
                path.display()
            )));
        }
        let max_len = f.dim(&["n_positions"], Some(DEFAULT_MAX_LEN))?;
        Ok(T5Config {
            architecture,
            vocab_size,
            d_model,
            d_kv,
            num_heads,
            d_ff,
            num_layers,
            num_buckets,
            max_distance,
            eps,
            act,
            gated,
            feed_forward_proj: proj,
            pad_token_id: f.pad_token_id(0, vocab_size)?,
            max_len,
            dtype: f.dtype()?,
        })
    }

    fn inner(&self) -> usize {
        self.d_kv * self.num_heads
    }
}

/// A T5 / mT5 encoder.
pub struct T5Encoder {
    cfg: T5Config,
    /// `[vocab_size, d_model]`, usually borrowed from the map.
    embed: Tensor,
    /// `[num_buckets, num_heads]` from the first block.
    rel_bias: Vec<f32>,
    /// Bucket of each absolute relative distance `0..max_distance` for a key before the query
    /// (one after it adds `num_buckets / 2`); distances past the table take the last bucket.
    buckets: Vec<usize>,
    /// The shared pre-norm block, run bidirectionally: RMSNorm, fused q/k/v, unscaled
    /// attention with the relative bias, `o`, then RMSNorm and the feed-forward (`wi`/`wo`,
    /// or gated `wi_0`/`wi_1`/`wo`), sequential residuals.
    blocks: Vec<Block>,
    final_norm: RmsNorm,
}

/// Loads a T5 / mT5 encoder from `config` (its `config.json`) and `store`.
pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Box<dyn Encoder>> {
    Ok(Box::new(T5Encoder::load(config, store, be)?))
}

impl T5Encoder {
    pub fn load(config: &Path, store: &WeightStore, be: &dyn GpuCompute) -> Result<Loaded<Self>> {
        let cfg = T5Config::from_file(config)?;
        let src = WeightSource::open(store, &LAYOUT)?;
        let w = src.weights();
        let (h, inner, ff, eps) = (cfg.d_model, cfg.inner(), cfg.d_ff, cfg.eps);
        let wt = |base: String| format!("{base}.weight");
        let embed = be.upload_weights(w.get(&wt(src.global("token_embd")), &[cfg.vocab_size, h])?);
        let rel_bias = w
            .get(
                &wt(src.layer(0, "attn_rel_b")),
                &[cfg.num_buckets, cfg.num_heads],
            )?
            .to_vec();
        let blocks = (0..cfg.num_layers)
            .into_par_iter()
            .map(|i| {
                let t = |name: &str| src.layer(i, name);
                let linear = |name: &str, i, o| Linear::load_with(be, w, &[&t(name)], i, o, false);
                // Gated: `wi_0` (activated) and `wi_1` fused as `[gate | up]`; each output is
                // still its own projection's dot product.
                let mlp = if cfg.gated {
                    let gate_up = [t("ffn_gate"), t("ffn_up")];
                    let gate_up = [gate_up[0].as_str(), gate_up[1].as_str()];
                    let down = t("ffn_down");
                    Mlp::Gated(GatedFfn::load(
                        be, w, &gate_up, &down, h, ff, false, false, cfg.act,
                    )?)
                } else {
                    Mlp::Plain {
                        fc1: linear("ffn_up", h, ff)?,
                        act: cfg.act,
                        fc2: linear("ffn_down", ff, h)?,
                        width: ff,
                    }
                };
                Ok(Block {
                    attn_norm: Norm::Rms(RmsNorm::load(be, w, &wt(t("attn_norm")), h, eps)?),
                    qkv: Linear::load_with(
                        be,
                        w,
                        &[&t("attn_q"), &t("attn_k"), &t("attn_v")],
                        h,
                        inner,
                        false,
                    )?,
                    o: linear("attn_output", inner, h)?,
                    mlp,
                    residual: Residual::Sequential {
                        ffn_norm: Norm::Rms(RmsNorm::load(be, w, &wt(t("ffn_norm")), h, eps)?),
                    },
                    attn: AttnShape {
                        heads: cfg.num_heads,
                        kv_heads: cfg.num_heads,
                        head_dim: cfg.d_kv,
                        scale: 1.0,
                        window: None,
                        softcap: None,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let final_norm = RmsNorm::load(be, w, &wt(src.global("output_norm")), h, eps)?;
        let buckets = (0..cfg.max_distance)
            .map(|n| bucket_of_distance(n, cfg.num_buckets, cfg.max_distance))
            .collect();
        let ffn = if cfg.gated {
            format!(
                "{}: {}(x·wi_0) × (x·wi_1), no biases [{}]",
                cfg.act.glu_name(),
                cfg.act.name(),
                cfg.feed_forward_proj
            )
        } else {
            format!(
                "dense + {}, no biases [{}]",
                cfg.act.name(),
                cfg.feed_forward_proj
            )
        };
        let spec = EncoderSpec {
            architecture: cfg.architecture,
            hidden_size: h,
            num_hidden_layers: cfg.num_layers,
            num_attention_heads: cfg.num_heads,
            intermediate_size: ff,
            vocab_size: cfg.vocab_size,
            type_vocab_size: 1,
            max_sequence_length: cfg.max_len,
            pad_token_id: cfg.pad_token_id,
            positions: format!(
                "relative (T5 buckets: {}, max distance {}; bias from block 0, shared)",
                cfg.num_buckets, cfg.max_distance
            ),
            attention: format!(
                "multi-head softmax, unscaled, {} heads × d_kv {} (inner {}), pre-RMSNorm",
                cfg.num_heads, cfg.d_kv, inner
            ),
            ffn,
            dtype: cfg.dtype.clone(),
        };
        Ok(Loaded::new(
            spec,
            w.prefix(),
            T5Encoder {
                embed,
                rel_bias,
                buckets,
                blocks,
                final_norm,
                cfg,
            },
        ))
    }

    /// The bucket of `key - query`.
    fn bucket(&self, rel: isize) -> usize {
        let n = rel.unsigned_abs();
        let b = self
            .buckets
            .get(n)
            .copied()
            .unwrap_or(self.cfg.num_buckets / 2 - 1);
        if rel > 0 {
            b + self.cfg.num_buckets / 2
        } else {
            b
        }
    }
}

/// transformers' `_relative_position_bucket` (bidirectional) for `|key - query| = n`, without
/// the direction offset. The logarithmic branch reproduces torch's float32 arithmetic
/// (`f32(ln(f32(n) / f32(max_exact)))  / f32(ln(max_distance / max_exact)) * f32(...)`,
/// truncated); the logarithm comes from [`ln_f64`] rounded to f32, not the platform's libm, so
/// the table is the same everywhere (checked against torch for every distance below 3000 over
/// bucket counts 4..256 and max distances 2..1024 when this was written).
fn bucket_of_distance(n: usize, num_buckets: usize, max_distance: usize) -> usize {
    let half = num_buckets / 2;
    let max_exact = half / 2;
    if n < max_exact {
        return n;
    }
    let ratio = n as f32 / max_exact as f32;
    let log = ln_f64(ratio as f64) as f32;
    let denom = ln_f64(max_distance as f64 / max_exact as f64) as f32;
    let v = (log / denom) * (half - max_exact) as f32;
    (max_exact + v as usize).min(half - 1)
}

/// Natural logarithm of a positive finite `x` in f64, platform-independent: `x = m·2^e` with
/// `m` in [√½, √2), `ln m = 2·atanh(s)`, `s = (m-1)/(m+1)`, |s| ≤ 0.172, summed to 1e-19.
fn ln_f64(x: f64) -> f64 {
    debug_assert!(x > 0.0 && x.is_finite());
    const LN2: f64 = std::f64::consts::LN_2;
    let bits = x.to_bits();
    let mut e = ((bits >> 52) & 0x7ff) as i64 - 1023;
    let mut m = f64::from_bits((bits & 0x000f_ffff_ffff_ffff) | 0x3ff0_0000_0000_0000);
    if m > std::f64::consts::SQRT_2 {
        m /= 2.0;
        e += 1;
    }
    let s = (m - 1.0) / (m + 1.0);
    let s2 = s * s;
    let mut term = s;
    let mut sum = 0.0;
    for k in 0..14 {
        sum += term / (2 * k + 1) as f64;
        term *= s2;
    }
    2.0 * sum + e as f64 * LN2
}

impl Forward for T5Encoder {
    fn forward(&self, be: &dyn GpuCompute, batch: &Batch) -> Result<Tensor> {
        let Batch {
            seqs,
            ref spans,
            total,
            ..
        } = *batch;
        let c = &self.cfg;
        let h = c.d_model;
        let inner = c.inner();
        let max_len = spans.iter().map(|s| s.len).max().unwrap_or(0);
        if total == 0 {
            return Ok(be.zeros(0));
        }

        // The position bias depends only on relative distance: per head, a row over distances
        // `-(max_len-1) ..= max_len-1`, the same values for every sequence whatever the
        // longest one in the batch, so a query's bias row is one contiguous slice.
        let width = 2 * max_len - 1;
        let mut table = vec![0.0f32; c.num_heads * width];
        for col in 0..width {
            let b = self.bucket(col as isize - (max_len as isize - 1));
            for head in 0..c.num_heads {
                table[head * width + col] = self.rel_bias[b * c.num_heads + head];
            }
        }
        let table = be.upload(table);
        let bias = AttnBias::Relative {
            table: &table,
            max_len,
        };

        let (qkv_dim, gated) = match c.gated {
            true => (3 * inner, c.d_ff),
            false => ((3 * inner).max(c.d_ff), 0),
        };
        let mut s = BlockBuffers::new(be, total, h, inner, qkv_dim, gated);
        let ids: Vec<u32> = seqs.iter().flat_map(|s| s.iter().copied()).collect();
        be.gather(&self.embed, h, &ids, s.x.at_mut(..));
        for b in &self.blocks {
            b.forward_bidirectional(be, &mut s, (total, h), spans, Some(&bias));
        }
        self.final_norm.forward(be, s.x.view(), s.normed.at_mut(..));
        Ok(s.normed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_matches_std_to_an_ulp_or_two() {
        for &x in &[0.5, 1.0, 1.5, 2.0, 3.0, 16.0, 1e-3, 12345.678, 0.999999] {
            let a = ln_f64(x);
            let b = f64::ln(x);
            assert!(
                (a - b).abs() <= 4.0 * f64::EPSILON * b.abs().max(1.0),
                "{x}: {a} {b}"
            );
        }
    }

    #[test]
    fn buckets_match_transformers() {
        // torch: T5Attention._relative_position_bucket(-arange(0, 38), True, 32, 128) and
        // (-arange(0, 12), True, 16, 8): keys before the query, no direction offset.
        let want_32_128 = vec![
            0, 1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11,
            11, 11, 11, 11, 11, 11, 12, 12, 12, 12, 12, 12,
        ];
        let got: Vec<usize> = (0..38).map(|n| bucket_of_distance(n, 32, 128)).collect();
        assert_eq!(got, want_32_128);
        let got: Vec<usize> = (0..12).map(|n| bucket_of_distance(n, 16, 8)).collect();
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5, 6, 7, 7, 7, 7, 7]);
    }
}
