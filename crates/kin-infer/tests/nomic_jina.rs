//! nomic-bert (rotary, SwiGLU) and JinaBERT (ALiBi, GLU): parity with the PyTorch goldens of
//! python/gen_fixtures_nomic_jina.py (both nomic config/tensor layouts, other sizes, a
//! non-power-of-two head count), Matryoshka truncation against the PyTorch reference, the
//! determinism contract bit for bit (alone vs batches of 3 and 32 among longer and shorter
//! neighbours, 1 vs 2 threads, every SIMD tier), and config errors that name their field.

use kin_infer::io::golden::{check, GoldenFile};
use kin_infer::kernels::Tier;
use kin_infer::nn::pooling::{Pooling, PoolingMode};
use kin_infer::{Embedder, EmbedderOptions, InferError};
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 4] = ["nomic_tiny", "nomic_orig", "jina_tiny", "jina_odd"];

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

/// Pseudo-random ids `>= 4` of varied lengths up to `max_len`.
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
                    4 + ((s >> 33) % (vocab as u64 - 4)) as u32
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
fn every_fixture_matches_its_golden() {
    for name in FIXTURES {
        let dir = fixture(name);
        let e = load(&dir, EmbedderOptions::default());
        let golden = GoldenFile::load(&dir.join("golden.json")).unwrap();
        let r = check(&e, &golden).unwrap();
        assert!(
            r.passed(),
            "{name}: max |diff| {} > tol {}: {:?}",
            r.max_diff,
            r.tol,
            r.mismatches.first()
        );
        assert!(r.compared > 0, "{name}: nothing compared");
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
    for name in FIXTURES {
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

fn json_floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// `tests/fixtures/nomic_tiny/matryoshka.json`: per text and N, (a) `truncated`: the pooled
/// vector's first N dims L2-normalized (what `--dimensions N` computes), and (b) the
/// nomic-embed-text-v1.5 recipe `normalize(layer_norm(pooled)[:N])`, rebuilt here from the
/// engine's own un-normalized pooled output and the deterministic layer-norm kernel.
#[test]
fn matryoshka_truncation_matches_pytorch() {
    let dir = fixture("nomic_tiny");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("matryoshka.json")).unwrap())
            .unwrap();
    let tol = doc["tol"].as_f64().unwrap() as f32;
    let raw = load(
        &dir,
        EmbedderOptions {
            normalize: Some(false),
            pooling: Some(Pooling::new(vec![PoolingMode::Mean])),
            ..Default::default()
        },
    );
    let hidden = raw.config().hidden_size;
    let k = kin_infer::kernels::kernels().unwrap();
    let mut worst = 0.0f32;
    for case in doc["cases"].as_array().unwrap() {
        let ids: Vec<u32> = case["input_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let n = case["dimensions"].as_u64().unwrap() as usize;
        let e = load(
            &dir,
            EmbedderOptions {
                dimensions: Some(n),
                ..Default::default()
            },
        );
        assert_eq!(e.dim(), n);
        let got = e.embed_tokens(&[&ids], None).unwrap().remove(0);
        let d = max_diff(&got, &json_floats(&case["truncated"]));
        assert!(d <= tol, "truncated to {n}: |diff| {d}");
        worst = worst.max(d);

        let mut pooled = raw.embed_tokens(&[&ids], None).unwrap().remove(0);
        assert_eq!(pooled.len(), hidden);
        k.layer_norm(&mut pooled, &vec![1.0; hidden], &vec![0.0; hidden], 1e-5);
        pooled.truncate(n);
        kin_infer::nn::pooling::l2_normalize(k, &mut pooled);
        let d = max_diff(&pooled, &json_floats(&case["nomic_layer_norm"]));
        assert!(d <= tol, "nomic layer_norm recipe, {n} dims: |diff| {d}");
    }
    assert!(worst < 1e-5, "worst truncated |diff| {worst}");
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
fn bad_configs_name_their_field() {
    use serde_json::json;
    type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
    let cases: Vec<(&str, &str, Edit)> = vec![
        (
            "nomic_orig",
            "n_embd",
            Box::new(|c| c["n_embd"] = json!("wide")),
        ),
        ("nomic_orig", "n_head", Box::new(|c| c["n_head"] = json!(3))),
        (
            "nomic_orig",
            "rotary_emb_fraction",
            Box::new(|c| c["rotary_emb_fraction"] = json!(0.0)),
        ),
        (
            "nomic_orig",
            "activation_function",
            Box::new(|c| c["activation_function"] = json!("gelu")),
        ),
        (
            "nomic_orig",
            "prenorm",
            Box::new(|c| c["prenorm"] = json!(true)),
        ),
        (
            "nomic_orig",
            "rotary_emb_scale_base",
            Box::new(|c| c["rotary_emb_scale_base"] = json!(512)),
        ),
        (
            "nomic_tiny",
            "rope_parameters.rope_type",
            Box::new(|c| c["rope_parameters"]["rope_type"] = json!("yarn")),
        ),
        (
            "nomic_tiny",
            "rope_parameters.rope_theta",
            Box::new(|c| c["rope_parameters"]["rope_theta"] = json!("big")),
        ),
        (
            "nomic_tiny",
            "hidden_act",
            Box::new(|c| c["hidden_act"] = json!("tanh")),
        ),
        (
            "nomic_tiny",
            "hidden_size",
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("hidden_size");
            }),
        ),
        (
            "jina_tiny",
            "feed_forward_type",
            Box::new(|c| c["feed_forward_type"] = json!("original")),
        ),
        (
            "jina_tiny",
            "num_attention_heads",
            Box::new(|c| c["num_attention_heads"] = json!(5)),
        ),
        (
            "jina_tiny",
            "max_position_embeddings",
            Box::new(|c| c["max_position_embeddings"] = json!(0)),
        ),
        (
            "jina_odd",
            "layer_norm_eps",
            Box::new(|c| c["layer_norm_eps"] = json!(-1.0)),
        ),
        (
            "jina_odd",
            "pad_token_id",
            Box::new(|c| c["pad_token_id"] = json!(1000)),
        ),
    ];
    for (name, field, edit) in cases {
        let dir = edited(name, edit);
        match Embedder::load(dir.path(), &EmbedderOptions::default()) {
            Err(InferError::Config { field: f, .. }) => {
                assert_eq!(f, field, "{name}: wrong field named")
            }
            Err(other) => panic!("{name}/{field}: expected a Config error, got {other}"),
            Ok(_) => panic!("{name}/{field}: loaded a bad config"),
        }
    }
}

#[test]
fn rope_theta_spellings_agree_and_matter() {
    // transformers 5.x writes rope_parameters.rope_theta; a top-level rope_theta (older
    // spelling) must give the same bits, and another base must change the output.
    let ids: Vec<u32> = (4..40).collect();
    let emb = |dir: &Path| {
        load(dir, EmbedderOptions::default())
            .embed_tokens(&[&ids], None)
            .unwrap()
    };
    let base = emb(&fixture("nomic_tiny"));
    let old = edited("nomic_tiny", |c| {
        c.as_object_mut().unwrap().remove("rope_parameters");
        c["rope_theta"] = serde_json::json!(1000.0);
    });
    assert_eq!(bits(&emb(old.path())), bits(&base));
    let other = edited("nomic_tiny", |c| {
        c["rope_parameters"]["rope_theta"] = serde_json::json!(10000.0)
    });
    assert_ne!(bits(&emb(other.path())), bits(&base));
}

#[test]
fn limits_and_describe_strings() {
    let e = load(&fixture("nomic_orig"), EmbedderOptions::default());
    let c = e.config();
    assert_eq!(c.max_sequence_length(), 48);
    assert!(
        c.positions.contains("rotary") && c.positions.contains("4 of 8"),
        "{}",
        c.positions
    );
    assert!(c.ffn.contains("SwiGLU"), "{}", c.ffn);
    let too_long: Vec<u32> = vec![5; 49];
    assert!(e.embed_tokens(&[&too_long], None).is_err());

    // rotary_scaling_factor (dynamic NTK) limits the length to max_trained_positions, where
    // the frequencies are still the plain ones.
    let ntk = edited("nomic_orig", |c| {
        c["rotary_scaling_factor"] = serde_json::json!(2.0);
        c["max_trained_positions"] = serde_json::json!(32);
    });
    let e = load(ntk.path(), EmbedderOptions::default());
    assert_eq!(e.config().max_sequence_length(), 32);

    let e = load(&fixture("jina_odd"), EmbedderOptions::default());
    let c = e.config();
    assert!(
        c.positions.contains("ALiBi") && c.positions.contains("5 head"),
        "{}",
        c.positions
    );
    assert!(c.ffn.contains("ReGLU"), "{}", c.ffn);
    assert_eq!(e.info().weight_prefix, "bert.");
}
