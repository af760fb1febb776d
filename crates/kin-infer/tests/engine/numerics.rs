//! Pins the exact output bits to `NUMERICS_VERSION`: a change to kernels or model code that
//! moves any bit fails here, and an intended one bumps the version with the new pin.

use crate::common::{fixture, load, random_sequences};
use kin_infer::{EmbedderOptions, NUMERICS_VERSION};

/// FNV-1a over the bit patterns.
fn fingerprint(vs: &[Vec<f32>]) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for v in vs {
        for x in v {
            for b in x.to_bits().to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
    }
    h
}

/// (numerics version, fixture, fingerprint of its embeddings of the fixed sequences)
const PINS: &[(&str, &str, u64)] = &[
    ("kin-numerics/1", "bert_tiny", 0xc4d07587412c2ac6),
    ("kin-numerics/1", "roberta_tiny", 0x65aee675b650c5b8),
];

#[test]
fn output_bits_are_pinned_to_the_numerics_version() {
    let pins: Vec<_> = PINS.iter().filter(|p| p.0 == NUMERICS_VERSION).collect();
    assert!(
        !pins.is_empty(),
        "no pin for numerics version {NUMERICS_VERSION}: add one"
    );
    for (_, name, want) in pins {
        let e = load(&fixture(name), EmbedderOptions::default());
        let seqs = random_sequences(e.config().vocab_size, &[1, 7, 23, 40], 42);
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let got = fingerprint(&e.embed_tokens(&refs, None).unwrap());
        assert_eq!(
            got, *want,
            "{name}: output bits changed under numerics version {NUMERICS_VERSION} (got {got:#x}); \
             if intended, bump NUMERICS_VERSION and pin the new value"
        );
    }
}
