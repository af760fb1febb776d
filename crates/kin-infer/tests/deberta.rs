//! DeBERTa (v1) and DeBERTa-v2/v3: parity with the PyTorch goldens of the fixtures made by
//! python/gen_fixtures_deberta.py, the determinism contract bit for bit (alone vs batches of
//! 3 and 32 among longer and shorter neighbours, 1 vs 2 threads, every SIMD tier), both
//! spellings of `pos_att_type`, and config errors that name their field.

mod support;

use kin_infer::{Embedder, EmbedderOptions};
use support::{
    assert_fixture_hidden_states_ignore_neighbours, assert_fixtures_deterministic,
    assert_fixtures_match_goldens, bits, edited, embed_in_batches as embed, fixture,
    ids_past_specials, load, remove_field, set, Edit,
};

const FIXTURES: [&str; 5] = [
    "deberta_v1_tiny",
    "deberta_v1_other",
    "deberta_v2_tiny",
    "deberta_v2_conv",
    "deberta_v2_other",
];

#[test]
fn every_deberta_fixture_matches_its_golden() {
    let reports = assert_fixtures_match_goldens(&FIXTURES);
    for (name, r) in FIXTURES.iter().zip(reports) {
        assert_eq!(r.tol, 1e-4, "{name}");
    }
}

#[test]
fn embeddings_are_identical_across_batches_threads_and_tiers() {
    assert_fixtures_deterministic(&FIXTURES);
}

#[test]
fn hidden_states_do_not_depend_on_neighbours() {
    assert_fixture_hidden_states_ignore_neighbours(&["deberta_v1_tiny", "deberta_v2_conv"]);
}

#[test]
fn pos_att_type_spellings_agree() {
    // deberta_v1_tiny's file says "c2p|p2c"; the list spelling and odd spacing/case agree.
    let seqs = ids_past_specials(100, 64, 6, 3);
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

#[test]
fn bad_configs_name_their_field() {
    let cases: Vec<(&str, Edit, &str)> = vec![
        (
            "deberta_v1_tiny",
            set("pos_att_type", serde_json::json!(["c2p", "p2p"])),
            "pos_att_type",
        ),
        (
            "deberta_v1_tiny",
            set("pos_att_type", serde_json::json!(3)),
            "pos_att_type",
        ),
        (
            "deberta_v1_tiny",
            remove_field("hidden_size"),
            "hidden_size",
        ),
        (
            "deberta_v1_tiny",
            set("num_attention_heads", 5),
            "num_attention_heads",
        ),
        ("deberta_v1_tiny", set("hidden_act", "swish"), "hidden_act"),
        (
            "deberta_v1_tiny",
            set("relative_attention", "yes"),
            "relative_attention",
        ),
        ("deberta_v1_tiny", set("talking_head", true), "talking_head"),
        (
            "deberta_v2_conv",
            set("conv_kernel_size", 4),
            "conv_kernel_size",
        ),
        ("deberta_v2_conv", set("conv_act", "softsign"), "conv_act"),
        ("deberta_v2_conv", set("conv_groups", 3), "conv_groups"),
        (
            "deberta_v2_tiny",
            set("position_buckets", 1),
            "position_buckets",
        ),
        (
            "deberta_v2_tiny",
            set("norm_rel_ebd", "batch_norm"),
            "norm_rel_ebd",
        ),
        (
            "deberta_v2_tiny",
            set("layer_norm_eps", "small"),
            "layer_norm_eps",
        ),
        // the relative table no longer has 2 * position_buckets rows
        (
            "deberta_v2_tiny",
            set("position_buckets", 6),
            "encoder.rel_embeddings.weight",
        ),
        // v1 without absolute positions in this checkpoint: the table is missing
        (
            "deberta_v1_other",
            set("position_biased_input", true),
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
