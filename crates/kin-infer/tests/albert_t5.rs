//! ALBERT, T5 / mT5 and sentence-transformers `Dense` modules: parity with the PyTorch goldens
//! (tests/fixtures/{albert,t5,mt5,st5}_*, made by python/gen_fixtures_albert_t5.py), the
//! determinism contract bit for bit (alone vs batches of 3 and 32 among longer and shorter
//! neighbours, 1 vs 2 threads, every SIMD tier), and configuration errors that name their
//! file and field.

mod support;

use kin_infer::{Embedder, EmbedderOptions, InferError};
use support::{
    assert_deterministic, assert_fixtures_match_goldens, assert_hidden_states_alone_match_together,
    config_error_path, copy_fixture, edit_json, embed_ids as embed, fixture, load, load_err,
    random_sequences, varied_lengths,
};

const FIXTURES: [&str; 5] = [
    "albert_tiny",
    "albert_dense",
    "t5_tiny",
    "mt5_tiny",
    "st5_tiny",
];

/// Pseudo-random id sequences of varied lengths (1 up to `max_len`).
fn sequences(vocab: usize, max_len: usize, count: usize) -> Vec<Vec<u32>> {
    random_sequences(vocab, &varied_lengths(count, max_len), 0x5eed)
}

#[test]
fn fixtures_match_their_pytorch_goldens() {
    assert_fixtures_match_goldens(&FIXTURES);
}

#[test]
fn embeddings_are_identical_alone_in_batches_across_threads_and_tiers() {
    assert_deterministic(&FIXTURES, &[3, 32], |base| {
        let c = base.config();
        // T5 sequences run far past relative_attention_max_distance.
        let max_len = c.max_sequence_length().min(100);
        sequences(c.vocab_size, max_len, 40)
    });
}

#[test]
fn t5_hidden_states_do_not_depend_on_the_longest_neighbour() {
    // The relative-bias table is sized by the longest sequence of the batch: a short sequence
    // must get the same bits next to a 120-token one.
    let e = load(&fixture("t5_tiny"), EmbedderOptions::default());
    let seqs = sequences(e.config().vocab_size, 120, 12);
    assert_hidden_states_alone_match_together("t5_tiny", &e, &seqs);
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
        let path = config_error_path(d.path(), field, &format!("{name} {field}={value:?}"));
        assert!(path.ends_with(file), "{name} {field}: {}", path.display());
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
        let path = config_error_path(d.path(), want, &format!("{field}={value:?}"));
        assert!(
            path.ends_with("2_Dense/config.json"),
            "{field}: {}",
            path.display()
        );
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
