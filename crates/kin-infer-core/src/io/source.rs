//! Where a family's weights come from, by logical name.
//!
//! A family asks for "layer 3's attention q" ([`WeightSource::layer`]`(3, "attn_q")`), never
//! for a checkpoint key: the per-container [`Layout`] maps the logical name to the physical one
//! (`model.layers.3.self_attn.q_proj` in a Hugging Face safetensors checkpoint; next, GGUF's
//! `blk.3.attn_q`). Logical names are GGUF's tensor vocabulary (the `gguf` package's
//! `constants.py`), so a GGUF layout is the identity and every other container is a table:
//!
//! - global: `token_embd`, `token_types`, `position_embd`, `token_embd_norm`, `output_norm`,
//!   `output`;
//! - per layer: `attn_norm`, `attn_q`, `attn_k`, `attn_v`, `attn_qkv` (fused), `attn_output`,
//!   `attn_output_norm`, `post_attention_norm`, `ffn_norm`, `ffn_gate`, `ffn_up`, `ffn_down`,
//!   `post_ffw_norm`, `layer_output_norm` (as in GGUF, a fused gate-and-up projection is
//!   `ffn_up` with twice the rows).
//!
//! Names are bases: the shared blocks append `.weight` / `.bias`, as both containers spell them.

use super::safetensors::{WeightStore, Weights};
use crate::error::Result;

/// One container's names for a family's tensors.
pub struct Layout {
    /// The container and family, for messages (`"safetensors, Hugging Face LLaMA"`).
    pub name: &'static str,
    /// Prefixes a checkpoint may nest every name under (`transformer.` for GPT-2 saved from
    /// a task head), tried in order against `token_embd`'s weight.
    pub prefixes: &'static [&'static str],
    /// Logical global name → physical base name.
    pub globals: &'static [(&'static str, &'static str)],
    /// Physical prefix of layer `i` (`"model.layers."` → `model.layers.{i}.`).
    pub layer_prefix: &'static str,
    /// Logical per-layer name → physical base name under the layer's prefix.
    pub layer: &'static [(&'static str, &'static str)],
}

fn lookup(table: &[(&'static str, &'static str)], logical: &str) -> Option<&'static str> {
    table.iter().find(|(l, _)| *l == logical).map(|(_, p)| *p)
}

impl Layout {
    /// The physical base name of a global tensor.
    ///
    /// # Panics
    /// If the layout has no such tensor: a family asked for a name its own table lacks (a
    /// programming error every family's fixture test reaches, never a property of the input).
    pub fn global(&self, logical: &str) -> String {
        match lookup(self.globals, logical) {
            Some(p) => p.to_string(),
            None => panic!("layout `{}` has no global tensor `{logical}`", self.name),
        }
    }

    /// The physical base name of layer `i`'s tensor (panics as [`Layout::global`]).
    pub fn layer(&self, i: usize, logical: &str) -> String {
        match lookup(self.layer, logical) {
            Some(p) => format!("{}{i}.{p}", self.layer_prefix),
            None => panic!("layout `{}` has no layer tensor `{logical}`", self.name),
        }
    }
}

/// A checkpoint's tensors seen through a [`Layout`]: families resolve logical names here and
/// hand the physical names to the shared blocks, which read them from [`WeightSource::weights`].
pub struct WeightSource<'a> {
    weights: Weights<'a>,
    layout: &'static Layout,
}

impl<'a> WeightSource<'a> {
    /// `store` through `layout`, its prefix resolved by probing for `token_embd`'s weight.
    pub fn open(store: &'a WeightStore, layout: &'static Layout) -> Result<Self> {
        Self::open_with_prefixes(store, layout, layout.prefixes)
    }

    /// [`WeightSource::open`] with the prefixes to try given by the caller (BERT's depend on
    /// the architecture: `bert.`, `roberta.`, ...).
    pub fn open_with_prefixes(
        store: &'a WeightStore,
        layout: &'static Layout,
        prefixes: &[&str],
    ) -> Result<Self> {
        let probe = format!("{}.weight", layout.global("token_embd"));
        Ok(WeightSource {
            weights: Weights::with_prefixes(store, prefixes, &probe)?,
            layout,
        })
    }

    /// The tensors, by physical name (what the blocks' loaders take).
    pub fn weights(&self) -> &Weights<'a> {
        &self.weights
    }

    pub fn layout(&self) -> &'static Layout {
        self.layout
    }

    /// Physical base name of a global tensor.
    pub fn global(&self, logical: &str) -> String {
        self.layout.global(logical)
    }

    /// Physical base name of layer `i`'s tensor.
    pub fn layer(&self, i: usize, logical: &str) -> String {
        self.layout.layer(i, logical)
    }

    /// Whether the checkpoint holds `{global}.{part}` (an optional tensor: a bias, a head).
    pub fn has_global(&self, logical: &str, part: &str) -> bool {
        self.weights
            .contains(&format!("{}.{part}", self.global(logical)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static T: Layout = Layout {
        name: "test",
        prefixes: &[""],
        globals: &[("token_embd", "model.embed_tokens")],
        layer_prefix: "model.layers.",
        layer: &[("attn_q", "self_attn.q_proj")],
    };

    #[test]
    fn logical_names_map_to_physical_ones() {
        assert_eq!(T.global("token_embd"), "model.embed_tokens");
        assert_eq!(T.layer(3, "attn_q"), "model.layers.3.self_attn.q_proj");
    }

    #[test]
    #[should_panic(expected = "layout `test` has no layer tensor `attn_k`")]
    fn a_name_the_table_lacks_is_named() {
        T.layer(0, "attn_k");
    }
}
