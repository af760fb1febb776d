//! `kin-infer convert` end to end: each llama / qwen2 decoder GGUF fixture converted with
//! `--json` generates, from the same `--prompt-ids`, the same tokens (ids and text) as the GGUF
//! itself; a non-empty `--out`, a bad `--dtype` and an unsupported architecture exit 2 with a
//! message naming the fix.

mod common;

use common::{assert_clean_error, fixture, kin, ok, run, text};
use serde_json::Value;
use std::path::Path;

fn gguf(name: &str) -> String {
    fixture(&format!("gguf/decoders/{name}.gguf"))
        .display()
        .to_string()
}

/// The token events and the stop reason of `generate --json` (the summary's timings differ
/// run to run).
fn tokens(model: &str) -> (Vec<Value>, Value) {
    let o = ok(&[
        "generate",
        "--model",
        model,
        "--prompt-ids",
        "1 5 9 33 2 7",
        "--max-tokens",
        "12",
        "--json",
    ]);
    let lines: Vec<Value> = text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let (last, events) = lines.split_last().unwrap();
    assert_eq!(last["event"], "summary");
    (events.to_vec(), last["stop_reason"].clone())
}

fn convert(model: &str, out: &Path, extra: &[&str]) -> std::process::Output {
    let out = out.display().to_string();
    let mut args = vec!["convert", "--model", model, "--out", &out];
    args.extend_from_slice(extra);
    run(&mut kin(&args), "")
}

#[test]
fn converted_directories_generate_what_the_gguf_generates() {
    let tmp = tempfile::tempdir().unwrap();
    // llama_mqa is left out: its vocabulary has no merges, so `generate` cannot print text
    // for the GGUF (tests/convert.rs of the library compares its logits).
    for name in [
        "llama_gqa.f32",
        "llama_gqa.q4_0",
        "llama_gqa.q4_1",
        "llama_gqa.q8_0",
        "qwen2_bias.f32",
        "qwen2_bias.q4_0",
        "qwen2_bias.q4_1",
        "qwen2_bias.q8_0",
    ] {
        let src = gguf(name);
        let out = tmp.path().join(name);
        let o = convert(&src, &out, &["--json"]);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", text(&o.stderr));
        let report: Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
        assert_eq!(report["dtype"], "float32", "{name}");
        assert!(report["tensors"].as_u64().unwrap() > 0, "{name}");
        assert!(out.join("model.safetensors").is_file(), "{name}");
        let (want, want_stop) = tokens(&src);
        let (got, got_stop) = tokens(&out.display().to_string());
        assert!(!want.is_empty(), "{name}");
        assert_eq!(got, want, "{name}: token events");
        assert_eq!(got_stop, want_stop, "{name}");
    }
}

#[test]
fn convert_errors_exit_2_and_name_the_fix() {
    let tmp = tempfile::tempdir().unwrap();
    let src = gguf("llama_gqa.q4_0");
    let out = tmp.path().join("m");
    let o = convert(&src, &out, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("wrote"), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "the summary is stderr's");
    assert_clean_error(&convert(&src, &out, &[]), 2, "--force");
    let o = convert(&src, &out, &["--force", "--dtype", "bf16"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let config: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["torch_dtype"], "bfloat16");
    assert_clean_error(
        &convert(&src, &tmp.path().join("d"), &["--dtype", "f8"]),
        2,
        "--dtype `f8`",
    );
    assert_clean_error(
        &convert(&gguf("phi_partial.f32"), &tmp.path().join("p"), &[]),
        2,
        "`phi2`",
    );
    assert_clean_error(
        &convert("/nonexistent/x.gguf", &tmp.path().join("n"), &[]),
        2,
        "--model",
    );
    assert!(!tmp.path().join("p").exists() && !tmp.path().join("n").exists());
}
