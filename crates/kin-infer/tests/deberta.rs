//! DeBERTa (v1) and DeBERTa-v2/v3: parity with the PyTorch goldens of the fixtures made by
//! python/gen_fixtures_deberta.py, the determinism contract bit for bit (alone vs batches of
//! 3 and 32 among longer and shorter neighbours, 1 vs 2 threads, every SIMD tier), both
//! spellings of `pos_att_type`, and config errors that name their field.

use kin_infer::io::golden::{check, GoldenFile};
use kin_infer::kernels::Tier;
use kin_infer::{Embedder, EmbedderOptions};
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 5] = [
    "deberta_v1_tiny",
    "deberta_v1_other",
    "deberta_v2_tiny",
    "deberta_v2_conv",
    "deberta_v2_other",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn load(dir: &Path, opts: EmbedderOptions) -> Embedder {
    Embedder::load(dir, &opts).unwrap_or_else(|e| panic!("load {}: {e}", dir.display()))
}

fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Pseudo-random ids `>= 4` (past the special tokens) of varied lengths up to `max_len`.
fn sequences(vocab: usize, max_len: usize, n: usize, seed: u64) -> Vec<Vec<u32>> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            let len = 1 + (i * 37 + 11) % max_len;
            (0..len)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    4 + ((s >> 33) as usize % (vocab - 4)) as u32
                })
                .collect()
        })
        .collect()
}

fn embed(e: &Embedder, seqs: &[Vec<u32>], batch: usize) -> Vec<Vec<f32>> {
    seqs.chunks(batch)
        .flat_map(|c| {
            let refs: Vec<&[u32]> = c.iter().map(Vec::as_slice).collect();
            e.embed_tokens(&refs, None).unwrap()
        })
        .collect()
}

#[test]
fn every_deberta_fixture_matches_its_golden() {
    for name in FIXTURES {
        let dir = fixture(name);
        let golden = GoldenFile::load(&dir.join("golden.json")).unwrap();
        let e = load(&dir, EmbedderOptions::default());
        let r = check(&e, &golden).unwrap();
        assert!(r.compared > 0, "{name}: nothing compared");
        assert!(
            r.passed(),
            "{name}: max |diff| {} > tol {}: {:?}",
            r.max_diff,
            r.tol,
            r.mismatches
        );
        assert_eq!(r.tol, 1e-4, "{name}");
    }
}

#[test]
fn embeddings_are_identical_across_batches_threads_and_tiers() {
    for name in FIXTURES {
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
        let seqs = sequences(c.vocab_size, c.max_sequence_length(), 40, 11);
        let reference = bits(&embed(&base, &seqs, 1));
        for batch in [3, 32] {
            assert_eq!(
                bits(&embed(&base, &seqs, batch)),
                reference,
                "{name}: batch {batch}"
            );
        }
        let mut rev = seqs.clone();
        rev.reverse();
        let mut out = embed(&base, &rev, 3);
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
                    bits(&embed(&e, &seqs, 32)),
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
    for name in ["deberta_v1_tiny", "deberta_v2_conv"] {
        let e = load(&fixture(name), EmbedderOptions::default());
        let c = e.config();
        let seqs = sequences(c.vocab_size, c.max_sequence_length(), 12, 5);
        let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let together = e.hidden_states(&refs, None).unwrap();
        for (i, s) in refs.iter().enumerate() {
            let alone = e.hidden_states(&[s], None).unwrap();
            assert_eq!(
                bits(&alone),
                bits(std::slice::from_ref(&together[i])),
                "{name}: sequence {i} (len {})",
                s.len()
            );
        }
    }
}

/// A copy of a fixture whose config.json is edited by `edit`.
fn edited(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let src = fixture(name);
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
    ] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
    std::fs::copy(
        src.join("1_Pooling/config.json"),
        dir.path().join("1_Pooling/config.json"),
    )
    .unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    dir
}

#[test]
fn pos_att_type_spellings_agree() {
    // deberta_v1_tiny's file says "c2p|p2c"; the list spelling and odd spacing/case agree.
    let seqs = sequences(100, 64, 6, 3);
    let base = bits(&embed(
        &load(&fixture("deberta_v1_tiny"), EmbedderOptions::default()),
        &seqs,
        6,
    ));
    for spelling in [
        serde_json::json!(["c2p", "p2c"]),
        serde_json::json!(["p2c", "c2p"]),
        serde_json::json!(" P2C | c2p"),
    ] {
        let dir = edited("deberta_v1_tiny", |c| c["pos_att_type"] = spelling.clone());
        let e = load(dir.path(), EmbedderOptions::default());
        assert_eq!(bits(&embed(&e, &seqs, 6)), base, "{spelling}");
    }
    // Dropping a term changes the result (and the scale factor).
    let dir = edited("deberta_v1_tiny", |c| c["pos_att_type"] = "c2p".into());
    let e = load(dir.path(), EmbedderOptions::default());
    assert_ne!(bits(&embed(&e, &seqs, 6)), base);
}

type Edit = Box<dyn Fn(&mut serde_json::Value)>;

#[test]
fn bad_configs_name_their_field() {
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "deberta_v1_tiny",
            Box::new(|c| c["pos_att_type"] = serde_json::json!(["c2p", "p2p"])),
            "pos_att_type",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| c["pos_att_type"] = serde_json::json!(3)),
            "pos_att_type",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("hidden_size");
            }),
            "hidden_size",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| c["num_attention_heads"] = 5.into()),
            "num_attention_heads",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| c["hidden_act"] = "swish".into()),
            "hidden_act",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| c["relative_attention"] = "yes".into()),
            "relative_attention",
        ),
        (
            "deberta_v1_tiny",
            Box::new(|c| c["talking_head"] = true.into()),
            "talking_head",
        ),
        (
            "deberta_v2_conv",
            Box::new(|c| c["conv_kernel_size"] = 4.into()),
            "conv_kernel_size",
        ),
        (
            "deberta_v2_conv",
            Box::new(|c| c["conv_act"] = "softsign".into()),
            "conv_act",
        ),
        (
            "deberta_v2_conv",
            Box::new(|c| c["conv_groups"] = 3.into()),
            "conv_groups",
        ),
        (
            "deberta_v2_tiny",
            Box::new(|c| c["position_buckets"] = 1.into()),
            "position_buckets",
        ),
        (
            "deberta_v2_tiny",
            Box::new(|c| c["norm_rel_ebd"] = "batch_norm".into()),
            "norm_rel_ebd",
        ),
        (
            "deberta_v2_tiny",
            Box::new(|c| c["layer_norm_eps"] = "small".into()),
            "layer_norm_eps",
        ),
        // the relative table no longer has 2 * position_buckets rows
        (
            "deberta_v2_tiny",
            Box::new(|c| c["position_buckets"] = 6.into()),
            "encoder.rel_embeddings.weight",
        ),
        // v1 without absolute positions in this checkpoint: the table is missing
        (
            "deberta_v1_other",
            Box::new(|c| c["position_biased_input"] = true.into()),
            "embeddings.position_embeddings.weight",
        ),
    ];
    for (name, edit, field) in cases {
        let dir = edited(name, edit);
        let err = match Embedder::load(dir.path(), &EmbedderOptions::default()) {
            Ok(_) => panic!("{name}: expected an error naming `{field}`"),
            Err(e) => e.to_string(),
        };
        assert!(
            err.contains(field),
            "{name}: error `{err}` does not name `{field}`"
        );
    }
}

#[test]
fn describe_strings_say_what_runs() {
    let e = load(&fixture("deberta_v2_tiny"), EmbedderOptions::default());
    let s = e.config();
    assert!(s.positions.contains("log buckets: 8"), "{}", s.positions);
    assert!(s.positions.contains("shared"), "{}", s.positions);
    assert!(s.attention.contains("c2p+p2c"), "{}", s.attention);
    let e = load(&fixture("deberta_v1_tiny"), EmbedderOptions::default());
    let s = e.config();
    assert!(s.positions.contains("clamped at ±8"), "{}", s.positions);
    assert!(s.positions.contains("absolute"), "{}", s.positions);
    let e = load(&fixture("deberta_v2_conv"), EmbedderOptions::default());
    assert!(
        e.config().attention.contains("conv"),
        "{}",
        e.config().attention
    );
}
