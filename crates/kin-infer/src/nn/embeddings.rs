//! The input embedding sum of the BERT-like families (BERT, RoBERTa, ALBERT, nomic-bert,
//! JinaBERT), over a packed batch.
//!
//! The order of the adds is transformers' (`(word + token_type) + position`); changing it
//! changes output bits, so it is written once here rather than per family. DeBERTa adds its
//! terms in another order and keeps its own loop.

/// A learned position table and the function giving each token of a sequence its row in it.
pub(crate) type Positions<'a> = (&'a [f32], &'a dyn Fn(&[u32]) -> Vec<usize>);

/// `(word[id] + token_type[type]) + position[pos]` per token (`word[id] + token_type[type]`
/// without positions), one `width`-wide row per token of the packed batch (`total` rows).
pub(crate) fn sum_embeddings(
    width: usize,
    word: &[f32],
    token_type: &[f32],
    positions: Option<Positions>,
    seqs: &[&[u32]],
    type_ids: Option<&[&[u32]]>,
    total: usize,
) -> Vec<f32> {
    let h = width;
    let mut x = vec![0.0f32; total * h];
    let mut r = 0;
    for (s, ids) in seqs.iter().enumerate() {
        let pos = positions.map(|(table, of)| (table, of(ids)));
        for (i, &t) in ids.iter().enumerate() {
            let tt = type_ids.map_or(0, |t| t[s][i]) as usize;
            let row = &mut x[r * h..][..h];
            let wrow = &word[t as usize * h..][..h];
            let trow = &token_type[tt * h..][..h];
            match &pos {
                Some((table, p)) => {
                    let prow = &table[p[i] * h..][..h];
                    for j in 0..h {
                        row[j] = (wrow[j] + trow[j]) + prow[j];
                    }
                }
                None => {
                    for j in 0..h {
                        row[j] = wrow[j] + trow[j];
                    }
                }
            }
            r += 1;
        }
    }
    x
}
