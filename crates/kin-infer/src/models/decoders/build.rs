//! The builder every decoder family loads through, so that a family file is config parsing
//! and tensor names: opening its [`Layout`], the token embeddings, norms, linears, the fused
//! `[q | k | v]` projection, the feed-forward kinds and the head are written here once, and
//! [`assemble`] turns a family's [`Sizes`], its description and its [`Parts`] into the one
//! [`DecoderModel`]. Nothing here chooses numerics: each helper loads what the family names,
//! exactly as the family did by hand (the pinned decoder fingerprints say so).

use super::block::{Block, DecoderModel, Embedding, Mlp, Parts, Stack};
use super::DecoderSpec;
use super::Sizes;
use crate::backend::GpuCompute;
use crate::error::Result;
use crate::io::safetensors::{StoredMatrix, WeightStore, Weights};
use crate::io::source::{Layout, WeightSource};
use crate::nn::ffn::{FfnAct, GatedFfn};
use crate::nn::{LayerNorm, Linear, Norm, RmsNorm};
use rayon::prelude::*;

/// A family's weights under its layout, with the backend they are prepared for.
pub(crate) struct Builder<'a> {
    be: &'a dyn GpuCompute,
    src: WeightSource<'a>,
    hidden: usize,
}

impl<'a> Builder<'a> {
    /// Opens `store` under `layout` for a model of width `hidden`.
    pub(crate) fn open(
        be: &'a dyn GpuCompute,
        store: &'a WeightStore,
        layout: &'static Layout,
        hidden: usize,
    ) -> Result<Self> {
        let src = WeightSource::open(store, layout)?;
        Ok(Builder { be, src, hidden })
    }

    pub(crate) fn w(&self) -> &Weights<'a> {
        self.src.weights()
    }

    /// A global tensor's base name (`output_norm` → `model.norm`).
    pub(crate) fn global(&self, logical: &str) -> String {
        self.src.global(logical)
    }

    /// Layer `i`'s base name of `logical`.
    pub(crate) fn layer(&self, i: usize, logical: &str) -> String {
        self.src.layer(i, logical)
    }

    fn embd(&self) -> String {
        format!("{}.weight", self.global("token_embd"))
    }

    /// The `[vocab, hidden]` token embeddings. A tied table is the head's own weight; an
    /// untied one in a stored format (bf16, a ggml block type) stays in it. Gathered rows are
    /// widened or dequantized exactly, so every choice gives the f32 table's bits.
    pub(crate) fn embedding(&self, vocab: usize, tied: bool) -> Result<Embedding> {
        if tied {
            return Ok(Embedding::Head);
        }
        Ok(
            match self.w().get_matrix(&self.embd(), &[vocab, self.hidden])? {
                StoredMatrix::F32(t) => Embedding::Table(self.be.upload(t.to_vec())),
                stored => {
                    Embedding::Matrix(self.be.prepare_weights(&[stored.rows()], self.hidden)?)
                }
            },
        )
    }

    /// An RMSNorm over `{base}.weight`.
    pub(crate) fn rms(&self, base: &str, eps: f32) -> Result<Norm> {
        let name = format!("{base}.weight");
        Ok(Norm::Rms(RmsNorm::load(
            self.be,
            self.w(),
            &name,
            self.hidden,
            eps,
        )?))
    }

    /// An RMSNorm whose stored `{base}.weight` is mapped first (Gemma's `1 + w`).
    pub(crate) fn rms_mapped(
        &self,
        base: &str,
        eps: f32,
        map: impl Fn(&[f32]) -> Vec<f32>,
    ) -> Result<Norm> {
        let w = self.w().get(&format!("{base}.weight"), &[self.hidden])?;
        Ok(Norm::Rms(RmsNorm::from_weight(self.be, map(&w), eps)))
    }

    /// A LayerNorm over `{base}.weight` and `{base}.bias`.
    pub(crate) fn layer_norm(&self, base: &str, eps: f32) -> Result<Norm> {
        let n = LayerNorm::load(self.be, self.w(), base, self.hidden, eps)?;
        Ok(Norm::Layer(n))
    }

    /// `{base}.weight` (`[out, in]`), with `{base}.bias` when `bias`.
    pub(crate) fn linear(&self, base: &str, i: usize, o: usize, bias: bool) -> Result<Linear> {
        Linear::load_with(self.be, self.w(), &[base], i, o, bias)
    }

    /// Layer `i`'s `attn_q`, `attn_k` and `attn_v` fused into one `[q | k | v]` projection
    /// (`q_dim`, `kv_dim`, `kv_dim` rows), with their biases when `bias`. `unpermute`: the q
    /// and k rows are in llama.cpp's rotary-pair order for heads of this size (undone here).
    pub(crate) fn qkv(
        &self,
        i: usize,
        (q_dim, kv_dim): (usize, usize),
        bias: bool,
        unpermute: Option<usize>,
    ) -> Result<Linear> {
        let (w, h) = (self.w(), self.hidden);
        let mut parts = Vec::with_capacity(3);
        let mut b = Vec::with_capacity(if bias { q_dim + 2 * kv_dim } else { 0 });
        for (name, rows) in [("attn_q", q_dim), ("attn_k", kv_dim), ("attn_v", kv_dim)] {
            let base = self.layer(i, name);
            let m = w.get_matrix(&format!("{base}.weight"), &[rows, h])?;
            parts.push(match unpermute {
                Some(hd) if name != "attn_v" => {
                    m.permute_rows(h, |r| crate::models::gguf_meta::unpermuted_row(r, hd))
                }
                _ => m,
            });
            if bias {
                b.extend_from_slice(&w.get(&format!("{base}.bias"), &[rows])?);
            }
        }
        let slices: Vec<_> = parts.iter().map(|m| m.rows()).collect();
        let weight = self.be.prepare_weights(&slices, h)?;
        Ok(Linear::from_parts(self.be, weight, bias.then_some(b)))
    }

    /// Layer `i`'s gated feed-forward without biases: `gate_up` (the gate then the up part,
    /// or one fused tensor) and `ffn_down`.
    pub(crate) fn gated(
        &self,
        i: usize,
        gate_up: &[&str],
        intermediate: usize,
        act: FfnAct,
    ) -> Result<Mlp> {
        let names: Vec<String> = gate_up.iter().map(|n| self.layer(i, n)).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let down = self.layer(i, "ffn_down");
        let (h, w) = (self.hidden, self.w());
        let ffn = GatedFfn::load(
            self.be,
            w,
            &names,
            &down,
            h,
            intermediate,
            false,
            false,
            act,
        )?;
        Ok(Mlp::Gated(ffn))
    }

    /// Layer `i`'s `fc2(act(fc1(x)))` from `ffn_up` and `ffn_down` through `linear` (a
    /// family's own way of reading a projection: with biases, or transposed from `Conv1D`).
    pub(crate) fn plain(
        &self,
        i: usize,
        width: usize,
        act: FfnAct,
        linear: impl Fn(&str, usize, usize) -> Result<Linear>,
    ) -> Result<Mlp> {
        let h = self.hidden;
        Ok(Mlp::Plain {
            fc1: linear(&self.layer(i, "ffn_up"), h, width)?,
            act,
            fc2: linear(&self.layer(i, "ffn_down"), width, h)?,
            width,
        })
    }

    /// The `[vocab, hidden]` head: the token embeddings when `tied`, else `output`; with
    /// `output.bias` when `bias` (Phi's head has one, also when its weight is tied).
    pub(crate) fn head(&self, vocab: usize, tied: bool, bias: bool) -> Result<Linear> {
        let (h, out) = (self.hidden, self.global("output"));
        if !tied {
            return self.linear(&out, h, vocab, bias);
        }
        let b = match bias {
            true => Some(self.w().get(&format!("{out}.bias"), &[vocab])?.to_vec()),
            false => None,
        };
        Linear::tied(self.be, self.w(), &self.embd(), h, vocab, b)
    }

    /// `layers` blocks, loaded in parallel (each reads only its own tensors).
    pub(crate) fn blocks(
        &self,
        layers: usize,
        block: impl Fn(usize) -> Result<Block> + Sync + Send,
    ) -> Result<Vec<Block>> {
        (0..layers).into_par_iter().map(block).collect()
    }
}

/// What `describe` says of a decoder beyond its sizes.
pub(crate) struct Described {
    pub(crate) model_type: String,
    pub(crate) positions: String,
    pub(crate) attention: String,
    pub(crate) ffn: String,
}

/// The decoder of `s`, described by `d`, running `p`.
pub(crate) fn assemble(s: &Sizes, d: Described, p: Parts) -> DecoderModel {
    let spec = DecoderSpec {
        model_type: d.model_type,
        hidden_size: s.hidden,
        num_hidden_layers: s.layers,
        num_attention_heads: s.heads,
        num_key_value_heads: s.kv_heads,
        head_dim: s.head_dim,
        intermediate_size: s.intermediate,
        vocab_size: s.vocab,
        max_sequence_length: s.context,
        eos_token_ids: s.eos.clone(),
        bos_token_id: s.bos,
        tied_embeddings: s.tied,
        positions: d.positions,
        attention: d.attention,
        ffn: d.ffn,
        dtype: s.dtype.clone(),
    };
    let stack = Stack {
        sizes: s.clone(),
        parts: p,
    };
    DecoderModel { spec, stack }
}
