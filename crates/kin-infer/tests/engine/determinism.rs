//! The determinism contract, bit for bit: thread counts, batch composition (alone, batches of
//! 3 and 32 among longer and shorter neighbours) and every SIMD tier this CPU supports.

use crate::common::{bits, fixture, load, minilm_dir, random_sequences, sample_texts};
use kin_infer::kernels::Tier;
use kin_infer::{Embedder, EmbedderOptions};

fn embed_ids(e: &Embedder, seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    e.embed_tokens(&refs, None).unwrap()
}

/// Embeds `seqs` in batches of `batch`, after shuffling each target among neighbours.
fn embed_in_batches(e: &Embedder, seqs: &[Vec<u32>], batch: usize) -> Vec<Vec<f32>> {
    seqs.chunks(batch).flat_map(|c| embed_ids(e, c)).collect()
}

fn sequences(vocab: usize, max_len: usize) -> Vec<Vec<u32>> {
    let lengths: Vec<usize> = (0..40).map(|i| 1 + (i * 37 + 11) % max_len).collect();
    random_sequences(vocab, &lengths, 7)
}

#[test]
fn fixture_embeddings_are_identical_across_threads_batches_and_tiers() {
    for name in ["bert_tiny", "roberta_tiny", "bert_sharded"] {
        let dir = fixture(name);
        let base = load(
            &dir,
            EmbedderOptions {
                threads: Some(1),
                tier: Some(Tier::Generic),
                ..Default::default()
            },
        );
        let c = base.config();
        let seqs = sequences(c.vocab_size, c.max_sequence_length());
        let reference: Vec<Vec<f32>> = seqs
            .iter()
            .flat_map(|s| embed_ids(&base, std::slice::from_ref(s)))
            .collect();
        let reference = bits(&reference);
        for batch in [3, 32, 40] {
            assert_eq!(
                bits(&embed_in_batches(&base, &seqs, batch)),
                reference,
                "{name}: batch {batch}"
            );
        }
        // Reversed order puts different neighbours around every sequence.
        let mut rev = seqs.clone();
        rev.reverse();
        let mut out = embed_in_batches(&base, &rev, 3);
        out.reverse();
        assert_eq!(bits(&out), reference, "{name}: reversed batches of 3");
        for tier in Tier::available() {
            for threads in [1, 2] {
                let e = load(
                    &dir,
                    EmbedderOptions {
                        threads: Some(threads),
                        tier: Some(tier),
                        ..Default::default()
                    },
                );
                assert_eq!(
                    bits(&embed_in_batches(&e, &seqs, 32)),
                    reference,
                    "{name}: tier {} with {threads} threads",
                    tier.name()
                );
            }
        }
    }
}

#[test]
fn hidden_states_do_not_depend_on_neighbours() {
    let e = load(&fixture("xlmr_tiny"), EmbedderOptions::default());
    let c = e.config();
    let seqs = sequences(c.vocab_size, c.max_sequence_length());
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let together = e.hidden_states(&refs, None).unwrap();
    for (s, row) in refs.iter().zip(&together) {
        let alone = e.hidden_states(&[s], None).unwrap();
        assert_eq!(bits(&alone), bits(std::slice::from_ref(row)));
    }
}

#[test]
fn minilm_texts_are_identical_across_threads_batches_and_tiers() {
    let Some(dir) = minilm_dir("minilm_texts_are_identical_across_threads_batches_and_tiers")
    else {
        return;
    };
    let texts = sample_texts();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let base = load(
        &dir,
        EmbedderOptions {
            threads: Some(1),
            tier: Some(Tier::Generic),
            ..Default::default()
        },
    );
    let alone: Vec<Vec<f32>> = refs
        .iter()
        .flat_map(|t| base.embed_texts(&[t]).unwrap())
        .collect();
    let reference = bits(&alone);
    for tier in Tier::available() {
        for threads in [1, 2] {
            let e = load(
                &dir,
                EmbedderOptions {
                    threads: Some(threads),
                    tier: Some(tier),
                    ..Default::default()
                },
            );
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
