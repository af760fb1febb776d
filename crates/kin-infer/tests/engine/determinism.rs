//! The determinism contract, bit for bit: thread counts, batch composition (alone, batches of
//! 3 and 32 among longer and shorter neighbours) and every SIMD tier this CPU supports.

use crate::common::{bits, fixture, load, minilm_dir, sample_texts};
use crate::support::{
    assert_deterministic, assert_hidden_states_alone_match_together, opts, random_sequences,
    varied_lengths,
};
use kin_infer::kernels::Tier;
use kin_infer::EmbedderOptions;

fn sequences(vocab: usize, max_len: usize) -> Vec<Vec<u32>> {
    random_sequences(vocab, &varied_lengths(40, max_len), 7)
}

#[test]
fn fixture_embeddings_are_identical_across_threads_batches_and_tiers() {
    let names = ["bert_tiny", "roberta_tiny", "bert_sharded"];
    assert_deterministic(&names, &[3, 32, 40], |base| {
        let c = base.config();
        sequences(c.vocab_size, c.max_sequence_length())
    });
}

#[test]
fn hidden_states_do_not_depend_on_neighbours() {
    let e = load(&fixture("xlmr_tiny"), EmbedderOptions::default());
    let c = e.config();
    let seqs = sequences(c.vocab_size, c.max_sequence_length());
    assert_hidden_states_alone_match_together("xlmr_tiny", &e, &seqs);
}

#[test]
fn minilm_texts_are_identical_across_threads_batches_and_tiers() {
    let Some(dir) = minilm_dir("minilm_texts_are_identical_across_threads_batches_and_tiers")
    else {
        return;
    };
    let texts = sample_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let base = load(&dir, opts(Tier::Generic, 1));
    let alone: Vec<Vec<f32>> = refs
        .iter()
        .flat_map(|t| base.embed_texts(&[t]).unwrap())
        .collect();
    let reference = bits(&alone);
    for tier in Tier::available_exact() {
        for threads in [1, 2] {
            let e = load(&dir, opts(tier, threads));
            for batch in [3, 32] {
                let out: Vec<Vec<f32>> = refs
                    .chunks(batch)
                    .flat_map(|c| e.embed_texts(c).unwrap())
                    .collect();
                assert_eq!(
                    bits(&out),
                    reference,
                    "tier {} threads {threads} batch {batch}",
                    tier.name()
                );
            }
        }
    }
}
