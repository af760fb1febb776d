//! What the reporting commands print: `quantize` names the tensors that fell back to another
//! type, `bench` reports min/median/max of separately timed repeats, and `describe` and `plan`
//! call the same quantity by the same name (issue 35, "help equals behaviour").

mod common;

use common::*;
use serde_json::Value;
use std::collections::BTreeMap;

fn ok_json(args: &[&str]) -> Value {
    let o = run(&mut kin(args), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    serde_json::from_str(text(&o.stdout).trim())
        .unwrap_or_else(|e| panic!("{args:?}: not one JSON object ({e}): {}", text(&o.stdout)))
}

fn decoder(name: &str) -> String {
    root()
        .join("tests/decoder_fixtures")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

#[test]
fn quantize_reports_each_fallback_with_its_reason() {
    // llama_gqa's rows are 64 and 96 values long: no Q4_K block (256) fits, Q5_0's (32) do.
    let m = decoder("llama_gqa");
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("q.gguf");
    let out = out.to_str().unwrap();

    let o = ok(&["quantize", "--model", &m, "--type", "q4_k", "--out", out]);
    let err = text(&o.stderr);
    assert!(
        err.contains(
            "q4_k requested: 16 tensors fell back to Q5_0 (row length not a multiple of 256)"
        ),
        "{err}"
    );

    let v = ok_json(&[
        "quantize", "--model", &m, "--type", "q4_k", "--out", out, "--json",
    ]);
    let f = v["fallbacks"].as_array().unwrap();
    assert_eq!(f.len(), 16, "{v}");
    // Every weight matrix: the two embeddings and 7 per layer, none of the norms.
    assert!(f.iter().any(|x| x["tensor"] == "token_embd.weight"));
    assert!(f
        .iter()
        .all(|x| !x["tensor"].as_str().unwrap().contains("norm")));
    for x in f {
        assert_eq!(x["requested"], "Q4_K", "{x}");
        assert_eq!(x["used"], "Q5_0", "{x}");
        assert_eq!(x["reason"], "row length not a multiple of 256", "{x}");
        assert!([64, 96].contains(&x["row_length"].as_u64().unwrap()), "{x}");
    }
    assert_eq!(v["tensor_types"]["Q5_0"], 16, "{v}");

    // The _M recipe's Q6_K falls back to Q8_0, reported as its own group.
    let o = ok(&["quantize", "--model", &m, "--type", "q4_k_m", "--out", out]);
    let err = text(&o.stderr);
    assert!(
        err.contains("q6_k requested: 3 tensors fell back to Q8_0"),
        "{err}"
    );
    assert!(
        err.contains("q4_k requested: 13 tensors fell back to Q5_0"),
        "{err}"
    );

    // A type whose blocks fit reports none, in text and JSON.
    let v = ok_json(&[
        "quantize", "--model", &m, "--type", "q8_0", "--out", out, "--json",
    ]);
    assert_eq!(v["fallbacks"], serde_json::json!([]), "{v}");
    let o = run(
        &mut kin(&["quantize", "--model", &m, "--type", "q8_0", "--out", out]),
        "",
    );
    assert!(
        !text(&o.stderr).contains("fell back"),
        "{}",
        text(&o.stderr)
    );

    // The safetensors variant keeps such a matrix F32, and says so.
    let dir = tmp.path().join("st");
    let v = ok_json(&[
        "quantize",
        "--model",
        &m,
        "--type",
        "q4_k",
        "--format",
        "safetensors",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let f = v["fallbacks"].as_array().unwrap();
    assert_eq!(f.len(), 16, "{v}");
    assert!(f.iter().all(|x| x["used"] == "F32"), "{v}");
}

#[test]
fn quantize_help_lists_every_type_with_its_bits() {
    let o = run(&mut kin(&["quantize", "--help"]), "");
    assert_eq!(o.status.code(), Some(0));
    let help = text(&o.stdout);
    for (ty, bits) in [
        ("q8_0", "8.5"),
        ("q4_0", "4.5"),
        ("q4_1", "5"),
        ("q5_0", "5.5"),
        ("q5_1", "6"),
        ("q4_k", "4.5"),
        ("q5_k", "5.5"),
        ("q6_k", "6.5625"),
        ("q4_k_m", "4.5-6.56"),
        ("q5_k_m", "5.5-6.56"),
        ("q4_k_s", "4.5"),
        ("q5_k_s", "5.5"),
        ("f32", "32"),
    ] {
        let line = help
            .lines()
            .find(|l| l.split_whitespace().next() == Some(ty))
            .unwrap_or_else(|| panic!("no line for --type {ty} in:\n{help}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[1..3], [bits, "bits"], "{line}");
        assert!(words.len() > 4, "no description: {line}");
    }
}

fn stats(v: &Value, key: &str) -> (f64, f64, f64) {
    let s = &v[key];
    let f = |k: &str| {
        s[k].as_f64()
            .unwrap_or_else(|| panic!("{key}.{k} missing: {v}"))
    };
    let (lo, med, hi) = (f("min"), f("median"), f("max"));
    assert!(0.0 < lo && lo <= med && med <= hi, "{key}: {s}");
    (lo, med, hi)
}

#[test]
fn bench_reports_the_median_of_separately_timed_repeats() {
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("texts.txt");
    let lines: Vec<String> = (0..7).map(|i| format!("hello world number {i}")).collect();
    std::fs::write(&input, lines.join("\n")).unwrap();
    let enc = root().join("tests/server_fixtures/embed_tiny");
    let args = [
        "bench",
        "--model",
        enc.to_str().unwrap(),
        "--input",
        input.to_str().unwrap(),
        "--batch-size",
        "3",
        "--repeat",
        "3",
        "--threads",
        "1",
        "--json",
    ];
    let v = ok_json(&args);
    assert_eq!(
        (v["repeat"].as_u64(), v["batches"].as_u64()),
        (Some(3), Some(3))
    );
    let (_, med, _) = stats(&v, "seconds");
    stats(&v, "batch_ms");
    let rate = v["texts_per_s"].as_f64().unwrap();
    assert!((rate - 7.0 / med).abs() <= 1e-6 * rate, "{v}");
    assert_eq!(v["texts_per_s"], v["texts_per_s_median"]);
    assert!(v["tokens_per_s"].as_f64().unwrap() > rate, "{v}");
    // The text form reports the same three numbers per pass and per batch.
    let o = run(&mut kin(&args[..args.len() - 1]), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    for label in [
        "seconds per pass (min/median/max)",
        "ms per batch of 3 (min/median/max)",
        "texts/s (median)",
    ] {
        assert!(out.contains(label), "{label}: {out}");
    }
    assert_eq!(text(&o.stderr).matches("repeat ").count(), 3);

    let d = decoder("llama_gqa");
    let v = ok_json(&[
        "bench",
        "--model",
        &d,
        "--prompt-tokens",
        "8",
        "--decode-tokens",
        "4",
        "--repeat",
        "3",
        "--json",
    ]);
    let (_, pmed, _) = stats(&v, "prefill_ms");
    let (_, dmed, _) = stats(&v, "decode_ms");
    let p = v["prefill_tokens_per_s"].as_f64().unwrap();
    let dr = v["decode_tokens_per_s"].as_f64().unwrap();
    assert!((p - 8.0 / (pmed / 1e3)).abs() <= 1e-6 * p, "{v}");
    assert!((dr - 4.0 / (dmed / 1e3)).abs() <= 1e-6 * dr, "{v}");
}

/// Every leaf of a JSON object, by its last key.
fn leaves(v: &Value, out: &mut BTreeMap<String, Value>) {
    if let Some(o) = v.as_object() {
        for (k, x) in o {
            if x.is_object() {
                leaves(x, out);
            } else {
                out.insert(k.clone(), x.clone());
            }
        }
    }
}

/// `key : value` rows of the text form.
fn rows(args: &[&str]) -> BTreeMap<String, String> {
    let o = run(&mut kin(args), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    text(&o.stdout)
        .lines()
        .filter_map(|l| l.split_once(" : "))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

#[test]
fn describe_and_plan_name_shared_quantities_alike() {
    let m = fixture("bert_tiny");
    let m = m.to_str().unwrap();
    let th = ["--threads", "1"];
    let (mut d, mut p) = (BTreeMap::new(), BTreeMap::new());
    leaves(
        &ok_json(&[&["describe", "--model", m, "--json"][..], &th].concat()),
        &mut d,
    );
    leaves(
        &ok_json(&[&["plan", "--model", m, "--json"][..], &th].concat()),
        &mut p,
    );
    // The quantities both report, under one name and with one value.
    // The run-time facts the text forms name alike too, then the model's shape.
    let facts = [
        "model",
        "threads",
        "simd_tier",
        "backend",
        "device",
        "numerics_version",
    ];
    for k in facts.into_iter().chain([
        "max_length",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
    ]) {
        assert!(
            d.contains_key(k) && p.contains_key(k),
            "`{k}`: describe {d:?} plan {p:?}"
        );
        assert_eq!(d[k], p[k], "`{k}`");
    }
    // The names that used to differ are gone from the plan.
    for old in ["tier", "max_sequence_length"] {
        assert!(!p.contains_key(old), "plan still has `{old}`: {p:?}");
    }
    // The text forms use the JSON names, so a reader of one finds the other.
    let dt = rows(&[&["describe", "--model", m][..], &th].concat());
    let pt = rows(&[&["plan", "--model", m][..], &th].concat());
    for k in facts {
        assert_eq!(dt.get(k), pt.get(k), "`{k}`: describe {dt:?} plan {pt:?}");
        assert!(dt.contains_key(k), "`{k}`");
    }
    for old in ["kernel tier", "simd tier", "batch size", "memory budget"] {
        assert!(!pt.contains_key(old), "plan text still says `{old}`");
    }
}
