//! nomic-bert (rotary, SwiGLU) and JinaBERT (ALiBi, GLU): parity with the PyTorch goldens of
//! python/gen_fixtures_nomic_jina.py (both nomic config/tensor layouts, other sizes, a
//! non-power-of-two head count), Matryoshka truncation against the PyTorch reference, the
//! determinism contract bit for bit (alone vs batches of 3 and 32 among longer and shorter
//! neighbours, 1 vs 2 threads, every SIMD tier), and config errors that name their field.

mod support;

use kin_infer::nn::pooling::{Pooling, PoolingMode};
use kin_infer::EmbedderOptions;
use std::path::Path;
use support::{
    assert_fixture_hidden_states_ignore_neighbours, assert_fixtures_deterministic,
    assert_fixtures_match_goldens, bits, config_error_path, edited, fixture, load, remove_field,
    Edit,
};

const FIXTURES: [&str; 4] = ["nomic_tiny", "nomic_orig", "jina_tiny", "jina_odd"];

#[test]
fn every_fixture_matches_its_golden() {
    assert_fixtures_match_goldens(&FIXTURES);
}

#[test]
fn hidden_states_do_not_depend_on_neighbours() {
    assert_fixture_hidden_states_ignore_neighbours(&FIXTURES);
}

#[test]
fn embeddings_are_identical_across_batches_threads_and_tiers() {
    assert_fixtures_deterministic(&FIXTURES);
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
        let ids: Vec<u32> = serde_json::from_value(case["input_ids"].clone()).unwrap();
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
        let norm = k.dot(&pooled, &pooled).sqrt().max(1e-12);
        pooled.iter_mut().for_each(|x| *x /= norm);
        let d = max_diff(&pooled, &json_floats(&case["nomic_layer_norm"]));
        assert!(d <= tol, "nomic layer_norm recipe, {n} dims: |diff| {d}");
    }
    assert!(worst < 1e-5, "worst truncated |diff| {worst}");
}

#[test]
fn bad_configs_name_their_field() {
    use serde_json::json;
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
        ("nomic_tiny", "hidden_size", remove_field("hidden_size")),
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
        config_error_path(dir.path(), field, &format!("{name}/{field}"));
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
