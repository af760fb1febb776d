//! ALBERT, T5 / mT5 and sentence-transformers `Dense` modules: parity with the PyTorch goldens
//! (tests/fixtures/{albert,t5,mt5,st5}_*, made by python/gen_fixtures_albert_t5.py), the
//! determinism contract bit for bit (alone vs batches of 3 and 32 among longer and shorter
//! neighbours, 1 vs 2 threads, every SIMD tier), and configuration errors that name their
//! file and field.

use kin_infer::io::golden::{check, GoldenFile};
use kin_infer::kernels::Tier;
use kin_infer::{Embedder, EmbedderOptions, InferError};
use std::path::{Path, PathBuf};

const FIXTURES: [&str; 5] = [
    "albert_tiny",
    "albert_dense",
    "t5_tiny",
    "mt5_tiny",
    "st5_tiny",
];

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(name)
}

fn load(dir: &Path, opts: EmbedderOptions) -> Embedder {
    Embedder::load(dir, &opts).unwrap_or_else(|e| panic!("load {}: {e}", dir.display()))
}

fn opts(tier: Tier, threads: usize) -> EmbedderOptions {
    EmbedderOptions {
        tier: Some(tier),
        threads: Some(threads),
        ..Default::default()
    }
}

/// Pseudo-random id sequences of varied lengths (1 up to `max_len`).
fn sequences(vocab: usize, max_len: usize, count: usize) -> Vec<Vec<u32>> {
    let mut s = 0x5eed_u64;
    (0..count)
        .map(|i| {
            let n = 1 + (i * 37 + 11) % max_len;
            (0..n)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((s >> 33) % vocab as u64) as u32
                })
                .collect()
        })
        .collect()
}

fn embed(e: &Embedder, seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    e.embed_tokens(&refs, None).unwrap()
}

fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn fixtures_match_their_pytorch_goldens() {
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
    }
}

#[test]
fn embeddings_are_identical_alone_in_batches_across_threads_and_tiers() {
    for name in FIXTURES {
        let dir = fixture(name);
        let base = load(&dir, opts(Tier::Generic, 1));
        let c = base.config();
        // T5 sequences run far past relative_attention_max_distance.
        let max_len = c.max_sequence_length().min(100);
        let seqs = sequences(c.vocab_size, max_len, 40);
        let alone: Vec<Vec<f32>> = seqs
            .iter()
            .flat_map(|s| embed(&base, std::slice::from_ref(s)))
            .collect();
        let reference = bits(&alone);
        for batch in [3, 32] {
            let out: Vec<Vec<f32>> = seqs.chunks(batch).flat_map(|c| embed(&base, c)).collect();
            assert_eq!(bits(&out), reference, "{name}: batches of {batch}");
        }
        let mut rev = seqs.clone();
        rev.reverse();
        let mut out: Vec<Vec<f32>> = rev.chunks(3).flat_map(|c| embed(&base, c)).collect();
        out.reverse();
        assert_eq!(bits(&out), reference, "{name}: reversed batches of 3");
        for tier in Tier::available() {
            for threads in [1, 2] {
                let e = load(&dir, opts(tier, threads));
                let out: Vec<Vec<f32>> = seqs.chunks(32).flat_map(|c| embed(&e, c)).collect();
                assert_eq!(
                    bits(&out),
                    reference,
                    "{name}: tier {} with {threads} threads",
                    tier.name()
                );
            }
        }
    }
}

#[test]
fn t5_hidden_states_do_not_depend_on_the_longest_neighbour() {
    // The relative-bias table is sized by the longest sequence of the batch: a short sequence
    // must get the same bits next to a 120-token one.
    let e = load(&fixture("t5_tiny"), EmbedderOptions::default());
    let seqs = sequences(e.config().vocab_size, 120, 12);
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let together = e.hidden_states(&refs, None).unwrap();
    for (s, t) in refs.iter().zip(&together) {
        let alone = e.hidden_states(&[*s], None).unwrap();
        assert_eq!(bits(&alone), bits(std::slice::from_ref(t)));
    }
}

#[test]
fn families_and_dense_modules_are_described() {
    let e = load(&fixture("t5_tiny"), EmbedderOptions::default());
    let c = e.config();
    assert_eq!(c.architecture.name(), "t5");
    assert!(
        c.positions.contains("T5 buckets: 16, max distance 8"),
        "{}",
        c.positions
    );
    assert!(c.attention.contains("inner 48"), "{}", c.attention);
    let e = load(&fixture("mt5_tiny"), EmbedderOptions::default());
    assert_eq!(e.config().architecture.name(), "mt5");
    assert!(e.config().ffn.contains("GeGLU"), "{}", e.config().ffn);
    let e = load(&fixture("albert_tiny"), EmbedderOptions::default());
    assert!(e.config().attention.contains("2 group(s) of 2"));
    let e = load(&fixture("albert_dense"), EmbedderOptions::default());
    assert_eq!(e.info().weight_prefix, "albert.");
    assert_eq!(e.dim(), 20);
    assert_eq!(e.dense().len(), 1);
    assert_eq!(e.dense()[0].describe(), "dense 40 → 20, bias, tanh");
    let e = load(&fixture("st5_tiny"), EmbedderOptions::default());
    assert_eq!(e.dim(), 16);
    assert_eq!(e.dense()[0].describe(), "dense 24 → 16, no bias, identity");
}

#[test]
fn dimensions_truncate_the_dense_output_then_normalize() {
    let dir = fixture("st5_tiny");
    let full = load(
        &dir,
        EmbedderOptions {
            normalize: Some(false),
            ..Default::default()
        },
    );
    let cut = load(
        &dir,
        EmbedderOptions {
            dimensions: Some(8),
            ..Default::default()
        },
    );
    let seqs = sequences(80, 20, 4);
    for (f, c) in embed(&full, &seqs).iter().zip(embed(&cut, &seqs)) {
        assert_eq!(c.len(), 8);
        let norm = f[..8].iter().map(|x| x * x).sum::<f32>().sqrt();
        for (a, b) in f[..8].iter().zip(&c) {
            assert!((a / norm - b).abs() < 1e-5, "{a} / {norm} vs {b}");
        }
    }
    // 20 fits the 24-wide pooled vector but not the 16-wide Dense output.
    let err = Embedder::load(
        &dir,
        &EmbedderOptions {
            dimensions: Some(20),
            ..Default::default()
        },
    )
    .err()
    .expect("dimensions past the Dense output must fail");
    assert!(err.to_string().contains("16"), "{err}");
}

/// A copy of a fixture (files and module directories) in a temp dir.
fn copy_fixture(name: &str) -> tempfile::TempDir {
    fn copy(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            let to = dst.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to);
            } else {
                std::fs::copy(e.path(), to).unwrap();
            }
        }
    }
    let d = tempfile::tempdir().unwrap();
    copy(&fixture(name), d.path());
    d
}

/// Sets (or with `None` removes) `field` in the JSON file `rel` of a fixture copy.
fn edit_json(dir: &Path, rel: &str, field: &str, value: Option<serde_json::Value>) {
    let p = dir.join(rel);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    match value {
        Some(x) => v[field] = x,
        None => {
            v.as_object_mut().unwrap().remove(field);
        }
    }
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn load_err(dir: &Path) -> InferError {
    Embedder::load(dir, &EmbedderOptions::default())
        .err()
        .expect("load must fail")
}

#[test]
fn bad_config_fields_are_named() {
    use serde_json::json;
    let cases: [(&str, &str, &str, Option<serde_json::Value>); 10] = [
        (
            "t5_tiny",
            "config.json",
            "feed_forward_proj",
            Some(json!("gated-frob")),
        ),
        (
            "t5_tiny",
            "config.json",
            "feed_forward_proj",
            Some(json!("relu-gated")),
        ),
        (
            "t5_tiny",
            "config.json",
            "relative_attention_max_distance",
            Some(json!(4)),
        ),
        ("t5_tiny", "config.json", "d_kv", None),
        (
            "mt5_tiny",
            "config.json",
            "layer_norm_epsilon",
            Some(json!("small")),
        ),
        ("mt5_tiny", "config.json", "num_heads", Some(json!(0))),
        (
            "albert_tiny",
            "config.json",
            "hidden_act",
            Some(json!("swishy")),
        ),
        (
            "albert_tiny",
            "config.json",
            "num_attention_heads",
            Some(json!(5)),
        ),
        (
            "albert_tiny",
            "config.json",
            "num_hidden_groups",
            Some(json!(9)),
        ),
        (
            "albert_tiny",
            "config.json",
            "embedding_size",
            Some(json!(-3)),
        ),
    ];
    for (name, file, field, value) in cases {
        let d = copy_fixture(name);
        edit_json(d.path(), file, field, value.clone());
        let err = load_err(d.path());
        match &err {
            InferError::Config { field: f, path, .. } => {
                assert_eq!(f, field, "{name} {field}={value:?}: {err}");
                assert!(path.ends_with(file), "{err}");
            }
            other => panic!("{name} {field}={value:?}: expected a Config error, got {other}"),
        }
    }
}

#[test]
fn bad_dense_modules_are_named_errors() {
    use serde_json::json;
    for (field, value, want) in [
        ("in_features", Some(json!(30)), "in_features"),
        ("out_features", None, "out_features"),
        (
            "activation_function",
            Some(json!("torch.nn.modules.activation.Softsign")),
            "activation_function",
        ),
        (
            "activation_function",
            Some(json!("my_package.Swish")),
            "activation_function",
        ),
        ("bias", Some(json!("yes")), "bias"),
    ] {
        let d = copy_fixture("st5_tiny");
        edit_json(d.path(), "2_Dense/config.json", field, value.clone());
        let err = load_err(d.path());
        match &err {
            InferError::Config { field: f, path, .. } => {
                assert_eq!(f, want, "{field}={value:?}: {err}");
                assert!(path.ends_with("2_Dense/config.json"), "{err}");
            }
            other => panic!("{field}={value:?}: expected a Config error, got {other}"),
        }
    }
    // Weights only as a pickle: unsupported, naming the file.
    let d = copy_fixture("st5_tiny");
    std::fs::rename(
        d.path().join("2_Dense/model.safetensors"),
        d.path().join("2_Dense/pytorch_model.bin"),
    )
    .unwrap();
    let err = load_err(d.path());
    assert!(
        matches!(err, InferError::Unsupported(_)) && err.to_string().contains("pytorch_model.bin"),
        "{err}"
    );
    // A Dense weight of the wrong shape names the tensor.
    let d = copy_fixture("st5_tiny");
    edit_json(
        d.path(),
        "2_Dense/config.json",
        "out_features",
        Some(json!(12)),
    );
    let err = load_err(d.path());
    assert!(
        matches!(err, InferError::ShapeMismatch { ref name, .. } if name == "linear.weight"),
        "{err}"
    );
    // A reading of the other sentence-transformers tensor name is not made up.
    let d = copy_fixture("albert_dense");
    edit_json(
        d.path(),
        "2_Dense/config.json",
        "module_input_name",
        Some(json!("token_embeddings")),
    );
    let err = load_err(d.path());
    assert!(
        matches!(err, InferError::Unsupported(_)) && err.to_string().contains("module_input_name"),
        "{err}"
    );
}

#[test]
fn missing_t5_tensors_name_themselves() {
    // A T5 checkpoint without the relative bias table of block 0.
    let d = copy_fixture("mt5_tiny");
    let path = d.path().join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let keep: Vec<(String, safetensors::tensor::TensorView)> = st
        .tensors()
        .into_iter()
        .filter(|(n, _)| !n.contains("relative_attention_bias"))
        .collect();
    safetensors::serialize_to_file(keep, None, &path).unwrap();
    let err = load_err(d.path());
    assert!(
        matches!(err, InferError::MissingTensor { ref name, .. } if name.contains("relative_attention_bias")),
        "{err}"
    );
}
