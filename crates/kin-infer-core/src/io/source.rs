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
//! Families GGUF has no vocabulary for (DeBERTa's relative tables, T5's relative bias, ALBERT's
//! factorized embedding) name theirs in the same style, documented in their own tables.
//!
//! A table may list a logical name more than once: alternatives in order, and
//! [`WeightSource`] takes the first the checkpoint holds (T5 keeps its embedding as `shared`
//! or, in an encoder-only export, as `encoder.embed_tokens`).

use super::safetensors::{WeightStore, Weights};
use crate::error::Result;

/// Logical name → physical base name, one group of a [`Layout`]'s table.
pub type Names = &'static [(&'static str, &'static str)];

/// One container's names for a family's tensors. Each table is a list of groups, read in order
/// as one list, so families that name a part alike share its group (the Hugging Face decoders'
/// attention, BERT's).
pub struct Layout {
    /// The container and family, for messages (`"safetensors, Hugging Face LLaMA"`).
    pub name: &'static str,
    /// Prefixes a checkpoint may nest every name under (`transformer.` for GPT-2 saved from
    /// a task head), tried in order against `token_embd`'s weight.
    pub prefixes: &'static [&'static str],
    /// Logical global name → physical base name.
    pub globals: &'static [Names],
    /// Physical prefix of a layer, each `{}` standing for one index in turn:
    /// `"model.layers.{}."` → `model.layers.3.`; ALBERT's shared layers
    /// `"encoder.albert_layer_groups.{}.albert_layers.{}."` take (group, layer in group).
    pub layer_prefix: &'static str,
    /// Logical per-layer name → physical base name under the layer's prefix.
    pub layer: &'static [Names],
}

/// Every physical name `logical` maps to, in the table's order.
fn lookup<'t>(table: &'t [Names], logical: &'t str) -> impl Iterator<Item = &'static str> + 't {
    table
        .iter()
        .flat_map(|group| group.iter())
        .filter(move |(l, _)| *l == logical)
        .map(|(_, p)| *p)
}

impl Layout {
    /// The first physical base name of global tensor `logical`, `None` when the table has none.
    pub fn global_name(&self, logical: &str) -> Option<&'static str> {
        lookup(self.globals, logical).next()
    }

    /// The first physical base name (under the layer prefix) of layer tensor `logical`.
    pub fn layer_name(&self, logical: &str) -> Option<&'static str> {
        lookup(self.layer, logical).next()
    }

    /// The physical base name of a global tensor (its first alternative).
    ///
    /// # Panics
    /// If the layout has no such tensor: a family asked for a name its own table lacks (a
    /// programming error every family's fixture test reaches, never a property of the input).
    pub fn global(&self, logical: &str) -> String {
        self.globals_named(logical)[0].to_string()
    }

    fn globals_named(&self, logical: &str) -> Vec<&'static str> {
        let found: Vec<_> = lookup(self.globals, logical).collect();
        if found.is_empty() {
            panic!("layout `{}` has no global tensor `{logical}`", self.name);
        }
        found
    }

    /// The physical base name of layer `i`'s tensor (panics as [`Layout::global`]).
    pub fn layer(&self, i: usize, logical: &str) -> String {
        self.layer_at(&[i], logical)
    }

    /// [`Layout::layer`] for a layer named by several indices (one per `{}` of
    /// `layer_prefix`).
    ///
    /// # Panics
    /// As [`Layout::global`], and if `indices` does not fill `layer_prefix`'s placeholders.
    pub fn layer_at(&self, indices: &[usize], logical: &str) -> String {
        self.layers_named(indices, logical).swap_remove(0)
    }

    /// Every alternative of a layer tensor, in the table's order (panics as
    /// [`Layout::layer_at`]).
    fn layers_named(&self, indices: &[usize], logical: &str) -> Vec<String> {
        let found: Vec<_> = lookup(self.layer, logical).collect();
        if found.is_empty() {
            panic!("layout `{}` has no layer tensor `{logical}`", self.name);
        }
        let parts: Vec<&str> = self.layer_prefix.split("{}").collect();
        assert_eq!(
            parts.len(),
            indices.len() + 1,
            "layout `{}`: `{}` takes {} indices, given {}",
            self.name,
            self.layer_prefix,
            parts.len() - 1,
            indices.len()
        );
        let mut prefix = parts[0].to_string();
        for (i, part) in indices.iter().zip(&parts[1..]) {
            prefix.push_str(&i.to_string());
            prefix.push_str(part);
        }
        found.iter().map(|p| format!("{prefix}{p}")).collect()
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
        // Any alternative of `token_embd` finds the prefix; a miss names the first.
        let mut first_err = None;
        for base in layout.globals_named("token_embd") {
            match Weights::with_prefixes(store, prefixes, &format!("{base}.weight")) {
                Ok(weights) => return Ok(WeightSource { weights, layout }),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        Err(first_err.expect("globals_named returns at least one name"))
    }

    /// The tensors, by physical name (what the blocks' loaders take).
    pub fn weights(&self) -> &Weights<'a> {
        &self.weights
    }

    pub fn layout(&self) -> &'static Layout {
        self.layout
    }

    /// Physical base name of a global tensor: the first alternative the checkpoint holds
    /// (as a `.weight` or a whole tensor), else the first (so a miss names it).
    pub fn global(&self, logical: &str) -> String {
        let names = self.layout.globals_named(logical);
        self.first_held(names.iter().map(|n| n.to_string()).collect())
    }

    /// Physical base name of layer `i`'s tensor (of its alternatives, as [`Self::global`]).
    pub fn layer(&self, i: usize, logical: &str) -> String {
        self.layer_at(&[i], logical)
    }

    /// Physical base name of a layer named by several indices ([`Layout::layer_at`]).
    pub fn layer_at(&self, indices: &[usize], logical: &str) -> String {
        self.first_held(self.layout.layers_named(indices, logical))
    }

    /// The first of `names` the checkpoint holds as `{name}.weight` or as a whole tensor;
    /// else the first, so that the loader's miss names it.
    fn first_held(&self, mut names: Vec<String>) -> String {
        let held =
            |b: &String| self.weights.contains(&format!("{b}.weight")) || self.weights.contains(b);
        match names.iter().position(held) {
            Some(i) => names.swap_remove(i),
            None => names.swap_remove(0),
        }
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
        globals: &[&[("token_embd", "model.embed_tokens")]],
        layer_prefix: "model.layers.{}.",
        layer: &[&[("attn_q", "self_attn.q_proj")]],
    };

    #[test]
    fn logical_names_map_to_physical_ones() {
        assert_eq!(T.global("token_embd"), "model.embed_tokens");
        assert_eq!(T.layer(3, "attn_q"), "model.layers.3.self_attn.q_proj");
    }

    static ALBERT_LIKE: Layout = Layout {
        name: "test, two indices",
        prefixes: &[""],
        globals: &[
            &[("token_embd", "shared")],
            &[("token_embd", "encoder.embed_tokens")],
        ],
        layer_prefix: "groups.{}.layers.{}.",
        layer: &[&[("attn_q", "attention.query")]],
    };

    #[test]
    fn a_layer_may_take_several_indices_and_a_global_alternatives() {
        assert_eq!(
            ALBERT_LIKE.layer_at(&[1, 2], "attn_q"),
            "groups.1.layers.2.attention.query"
        );
        assert_eq!(ALBERT_LIKE.global("token_embd"), "shared");
        assert_eq!(
            ALBERT_LIKE.globals_named("token_embd"),
            ["shared", "encoder.embed_tokens"]
        );
    }

    #[test]
    #[should_panic(expected = "takes 2 indices, given 1")]
    fn a_layer_with_too_few_indices_is_named() {
        ALBERT_LIKE.layer(0, "attn_q");
    }

    #[test]
    #[should_panic(expected = "layout `test` has no layer tensor `attn_k`")]
    fn a_name_the_table_lacks_is_named() {
        T.layer(0, "attn_k");
    }
}
