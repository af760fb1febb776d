//! The `kin-infer` binary's contract: exit codes, stdout/stderr split, output format.

mod common;

use common::*;
use std::path::Path;

#[test]
fn bare_invocation_lists_commands() {
    let o = run(&mut kin(&[]), "");
    let all = text(&o.stdout) + &text(&o.stderr);
    for c in ["embed", "describe", "check", "bench"] {
        assert!(all.contains(c), "{all}");
    }
}

/// `check` of the fixture `dir` against its own golden passes; the golden's JSON, for a test
/// to perturb.
fn passes_own_golden(dir: &Path) -> serde_json::Value {
    let g = dir.join("golden.json");
    let o = check(dir, &g, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("PARITY OK"));
    serde_json::from_str(&std::fs::read_to_string(&g).unwrap()).unwrap()
}

#[test]
fn check_passes_fixtures_and_fails_perturbed_goldens() {
    let dir = fixture("roberta_tiny");
    let mut v = passes_own_golden(&dir);
    let e = &mut v["cases"][0]["expected"][1][0][3];
    *e = serde_json::json!(e.as_f64().unwrap() + 0.5);
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("g.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let o = check(&dir, &bad, &[]);
    assert_eq!(o.status.code(), Some(1));
    let out = text(&o.stdout);
    assert!(
        out.contains("PARITY FAILED") && out.contains("sequence 1, token 0, dim 3"),
        "{out}"
    );

    let o = check(&dir, &bad, &["--json"]);
    let j: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(j["result"], "PARITY FAILED");

    v.as_object_mut().unwrap().remove("tol");
    std::fs::write(&bad, v.to_string()).unwrap();
    let o = check(&dir, &bad, &[]);
    assert_clean_error(&o, 2, "tol");
}

#[test]
fn broken_models_exit_2_without_panicking() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    std::fs::copy(fixture("bert_tiny/config.json"), d.join("config.json")).unwrap();
    let w = std::fs::read(fixture("bert_tiny/model.safetensors")).unwrap();
    std::fs::write(d.join("model.safetensors"), &w[..w.len() / 3]).unwrap();
    let o = run(&mut kin(&["describe", "--model", d.to_str().unwrap()]), "");
    assert_clean_error(&o, 2, "model.safetensors");

    let o = run(&mut kin(&["embed", "--model", "/nonexistent/dir"]), "hi\n");
    assert_clean_error(&o, 2, "not found");

    // Text input on a checkpoint without tokenizer.json.
    let o = run(
        &mut kin(&["embed", "--model", fixture("bert_tiny").to_str().unwrap()]),
        "hello\n",
    );
    assert_clean_error(&o, 2, "tokenizer.json");
    assert!(o.stdout.is_empty());

    let o = run(
        kin_on("describe", &fixture("bert_tiny"), &[]).env("KIN_INFER_SIMD", "sse9"),
        "",
    );
    assert_clean_error(&o, 2, "sse9");
}

#[test]
fn describe_reports_numerics_version_and_tier() {
    let o = ok(&[
        "describe",
        "--model",
        fixture("bert_sharded").to_str().unwrap(),
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(j["numerics_version"], kin_infer::NUMERICS_VERSION);
    assert_eq!(j["shards"], 3);
    assert_eq!(j["dtype"], "F16");
    assert_eq!(j["pooling"], "lasttoken");
    assert!(j["simd_tier"].is_string() && j["threads"].is_u64());
}

#[test]
fn repo_id_resolves_from_the_hf_cache() {
    let cache = tempfile::tempdir().unwrap();
    let snap = cache.path().join("models--acme--tiny/snapshots/0123abcd");
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(cache.path().join("models--acme--tiny/refs")).unwrap();
    std::fs::write(
        cache.path().join("models--acme--tiny/refs/main"),
        "0123abcd",
    )
    .unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(fixture("xlmr_tiny").join(f), snap.join(f)).unwrap();
    }
    let o = run(
        kin(&["describe", "--model", "acme/tiny", "--json"]).env("HF_HUB_CACHE", cache.path()),
        "",
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("0123abcd"));
    let o = run(
        kin(&["describe", "--model", "acme/absent"]).env("HF_HUB_CACHE", cache.path()),
        "",
    );
    assert_clean_error(&o, 2, "acme/absent");
}

#[test]
fn embed_writes_ordered_jsonl_with_ids_and_round_trip_floats() {
    let Some(m) = minilm() else { return };
    let m = m.to_str().unwrap();
    let input = "{\"id\": \"a\", \"text\": \"fn main() {}\"}\n{\"text\": \"\"}\n\n{\"id\": 7, \"text\": \"ünïcödé\"}\n";
    let o = run(
        &mut kin(&["embed", "--model", m, "--jsonl", "--batch-size", "2"]),
        input,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let rows: Vec<serde_json::Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["id"], "a");
    assert!(rows[1]["id"].is_null());
    assert_eq!(rows[2]["id"], 7);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["index"], i);
        assert_eq!(r["embedding"].as_array().unwrap().len(), 384);
    }
    // Same bits whatever the batch size or thread count; floats round-trip through text.
    let plain = "fn main() {}\n\nünïcödé\n";
    let a = run(
        &mut kin(&["embed", "--model", m, "--batch-size", "1", "--threads", "1"]),
        plain,
    );
    let b = run(
        &mut kin(&["embed", "--model", m, "--batch-size", "3", "--threads", "2"]),
        plain,
    );
    assert_eq!(a.stdout, b.stdout);
    // Printed floats parse back to exactly the library's f32 bits.
    let first_embedding = |out: &[u8]| -> Vec<u32> {
        let row: serde_json::Value =
            serde_json::from_str(text(out).lines().next().unwrap()).unwrap();
        row["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| (x.as_f64().unwrap() as f32).to_bits())
            .collect()
    };
    let lib = kin_infer::Embedder::load(Path::new(m), &Default::default()).unwrap();
    let v = lib.embed_texts(&["fn main() {}"]).unwrap();
    let want: Vec<u32> = v[0].iter().map(|x| x.to_bits()).collect();
    assert_eq!(first_embedding(&a.stdout), want);
    assert_eq!(first_embedding(&o.stdout), want);
}

#[test]
fn bad_jsonl_exits_2_and_leaves_no_output_file() {
    let Some(m) = minilm() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.jsonl");
    for (bad, needle) in [
        ("{\"text\": \"ok\"}\nnot json\n", "line 2"),
        ("[1, 2]\n", "JSON object"),
        ("{\"text\": 5}\n", "text"),
        ("{\"id\": 1}\n", "text"),
    ] {
        let o = run(
            &mut kin_on("embed", &m, &["--jsonl", "--output", out.to_str().unwrap()]),
            bad,
        );
        assert_clean_error(&o, 2, needle);
        assert!(!out.exists(), "partial output left behind for {bad:?}");
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}

#[test]
fn every_simd_tier_writes_the_same_bytes() {
    let Some(m) = minilm() else { return };
    let input =
        "fn main() {}\n\nünïcödé ✓ 日本語\n".to_string() + &"let x = 1; ".repeat(200) + "\n";
    let reference = run(
        kin(&["embed", "--model", m.to_str().unwrap()]).env("KIN_INFER_SIMD", "generic"),
        &input,
    );
    assert_eq!(
        reference.status.code(),
        Some(0),
        "{}",
        text(&reference.stderr)
    );
    for tier in kin_infer::kernels::Tier::available_exact() {
        for threads in ["1", "2"] {
            let o = run(
                kin(&["embed", "--model", m.to_str().unwrap(), "--batch-size", "2"])
                    .env("KIN_INFER_SIMD", tier.name())
                    .env("KIN_INFER_THREADS", threads),
                &input,
            );
            assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
            assert!(
                o.stdout == reference.stdout,
                "tier {} threads {threads} differs from generic",
                tier.name()
            );
        }
    }
}

#[test]
fn check_replays_decoder_logits_and_generate_goldens() {
    let dir = root().join("tests/decoder_fixtures/llama_gqa");
    let mut v = passes_own_golden(&dir);
    // One generated token changed: PARITY FAILED naming the position, exit 1.
    let case = v["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["kind"] == "generate")
        .unwrap();
    let t = case["expected_tokens"][0][2].as_u64().unwrap();
    case["expected_tokens"][0][2] = serde_json::json!(t + 1);
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("g.json");
    std::fs::write(&bad, v.to_string()).unwrap();
    let o = check(&dir, &bad, &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o.stdout).contains("new token 2"),
        "{}",
        text(&o.stdout)
    );
    // An encoder golden against a decoder is a usage error, not a pass.
    let enc = fixture("bert_tiny").join("golden.json");
    let o = check(&dir, &enc, &[]);
    assert_clean_error(&o, 2, "encoder");
}
