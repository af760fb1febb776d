//! The input embedding sum of the BERT-like families (BERT, RoBERTa, ALBERT, nomic-bert,
//! JinaBERT), over a packed batch.
//!
//! The order of the adds is transformers' (`(word + token_type) + position`); changing it
//! changes output bits, so it is written once here rather than per family. DeBERTa adds its
//! terms in another order and keeps its own loop.

use crate::backend::{GpuCompute, Tensor};

/// A learned position table and the function giving each token of a sequence its row in it.
pub type Positions<'a> = (&'a Tensor, &'a dyn Fn(&[u32]) -> Vec<usize>);

/// `(word[id] + token_type[type]) + position[pos]` per token (`word[id] + token_type[type]`
/// without positions), one `width`-wide row per token of the packed batch:
/// a gather and one or two gather-adds, which round exactly in that order.
pub fn sum_embeddings(
    be: &dyn GpuCompute,
    width: usize,
    word: &Tensor,
    token_type: &Tensor,
    positions: Option<Positions>,
    seqs: &[&[u32]],
    type_ids: Option<&[&[u32]]>,
) -> Tensor {
    let ids: Vec<u32> = seqs.iter().flat_map(|s| s.iter().copied()).collect();
    let total = ids.len();
    let types: Vec<u32> = match type_ids {
        Some(t) => t.iter().flat_map(|s| s.iter().copied()).collect(),
        None => vec![0; total],
    };
    let mut x = be.zeros(total * width);
    be.gather(word, width, &ids, x.at_mut(..));
    be.gather_add(token_type, width, &types, x.at_mut(..));
    if let Some((table, of)) = positions {
        let pos: Vec<u32> = seqs
            .iter()
            .flat_map(|ids| of(ids).into_iter().map(|p| p as u32))
            .collect();
        be.gather_add(table, width, &pos, x.at_mut(..));
    }
    x
}
