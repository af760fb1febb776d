//! Crafted inputs from the hardening audit (issue 10): sizes read from `config.json`, golden
//! files and sentence-transformers files that used to abort, overflow or pass silently. Each
//! must be a clean error (exit 2, a message naming the field, no panic) or a correct run.
//! Memory limits are imposed with `ulimit -v` (RLIMIT_AS), which the library reads.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn decoder_fixture(name: &str) -> PathBuf {
    root().join("tests/decoder_fixtures").join(name)
}

/// A copy of fixture directory `src` in a temporary directory, with `edit` applied to the JSON
/// file `file` (relative to the copy).
fn edited(src: &Path, file: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_dir(src, tmp.path());
    let p = tmp.path().join(file);
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
    tmp
}

fn copy_dir(src: &Path, dst: &Path) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.path().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
}

fn kin_out(args: &[&str]) -> Output {
    kin(args).output().unwrap()
}

/// `kin-infer ARGS` under `ulimit -v KIB` (the process's address-space limit).
fn kin_limited(kib: u64, args: &[&str]) -> Output {
    let mut script = format!("ulimit -v {kib} && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_kin-infer"))
        .args(args)
        .env_remove("KIN_INFER_SIMD")
        // One thread and few malloc arenas: on a many-core host, per-thread stacks and arenas
        // (64 MiB of address space each) would use up the limit before the model does.
        .env("KIN_INFER_THREADS", "1")
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap()
}

fn dir_arg(t: &tempfile::TempDir) -> String {
    t.path().display().to_string()
}

#[test]
fn decoder_head_dim_2_pow_40_is_a_config_error() {
    // Phi and Qwen2 had no bound: `describe` aborted on a 35 TB rotary table.
    for fixture in ["phi_partial", "qwen2_bias", "llama_gqa", "gemma_tied"] {
        let t = edited(&decoder_fixture(fixture), "config.json", |v| {
            v["head_dim"] = Value::from(1u64 << 40);
        });
        let o = kin_out(&["describe", "--model", &dir_arg(&t)]);
        assert_clean_error(&o, 2, "head_dim");
        assert!(
            text(&o.stderr).contains("is out of range (1..="),
            "{fixture}: limit not named: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn describe_of_max_position_embeddings_2_pow_24_allocates_no_rope_table() {
    // The tables for 2^24 positions took 1.6 GB and 5-9 s at load; they are now built as
    // positions are used, so describe fits in a 1 GiB address space.
    for fixture in ["gemma_tied", "llama_gqa", "phi3_longrope", "phi_partial"] {
        let t = edited(&decoder_fixture(fixture), "config.json", |v| {
            v["max_position_embeddings"] = Value::from(1u64 << 24);
        });
        let o = kin_limited(1 << 20, &["describe", "--model", &dir_arg(&t), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{fixture}: {}", text(&o.stderr));
        let d: Value = serde_json::from_slice(&o.stdout).unwrap();
        assert!(d.is_object(), "{fixture}");
    }
}

/// `generate --model DIR --prompt-ids "1 2" --max-tokens N [extra...]`.
fn generate_args<'a>(dir: &'a str, max_tokens: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let base = [
        "generate",
        "--model",
        dir,
        "--prompt-ids",
        "1 2",
        "--max-tokens",
        max_tokens,
    ];
    [&base[..], extra].concat()
}

#[test]
fn dynamic_rope_factor_1e300_is_rejected() {
    let t = edited(&decoder_fixture("llama_rope_dynamic"), "config.json", |v| {
        v["rope_parameters"]["factor"] = Value::from(1e300);
    });
    let o = kin_out(&["describe", "--model", &dir_arg(&t)]);
    assert_clean_error(&o, 2, "factor");
    // A factor within bounds whose context passes the largest supported one.
    let t = edited(&decoder_fixture("llama_rope_dynamic"), "config.json", |v| {
        v["max_position_embeddings"] = Value::from(1u64 << 20);
        v["rope_parameters"]["factor"] = Value::from(1000.0);
    });
    let o = kin_out(&generate_args(&dir_arg(&t), "18446744073709551615", &[]));
    assert_clean_error(&o, 2, "context");
}

#[test]
fn max_tokens_beyond_the_context_is_an_error() {
    let dir = decoder_fixture("llama_gqa").display().to_string();
    for n in ["65", "1000000", "18446744073709551615"] {
        let o = kin_out(&generate_args(&dir, n, &[]));
        assert_clean_error(&o, 2, "context");
        assert!(o.stdout.is_empty());
    }
    // Up to the context is a correct run (it stops when the context fills).
    let o = kin_out(&generate_args(&dir, "64", &["--json"]));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

#[test]
fn kv_cache_that_cannot_fit_is_a_typed_error() {
    // 2^24 positions x 2 layers x 32 kv floats x (k, v) = 8 GiB of cache, under a 1 GiB limit.
    let t = edited(&decoder_fixture("llama_gqa"), "config.json", |v| {
        v["max_position_embeddings"] = Value::from(1u64 << 24);
    });
    let o = kin_limited(1 << 20, &generate_args(&dir_arg(&t), "16000000", &[]));
    assert_clean_error(&o, 2, "RLIMIT_AS");
    assert!(text(&o.stderr).contains("KV cache"), "{}", text(&o.stderr));
}

#[test]
fn golden_whose_only_case_generates_zero_tokens_compares_nothing() {
    let dir = decoder_fixture("llama_gqa");
    let tmp = tempfile::tempdir().unwrap();
    let g = tmp.path().join("golden.json");
    let golden = serde_json::json!({
        "format": "kin-infer-golden/1", "tol": 1e-4,
        "cases": [{"kind": "generate", "input_ids": [[1, 2, 3]], "max_new_tokens": 0,
                   "expected_tokens": [[]]}]
    });
    std::fs::write(&g, golden.to_string()).unwrap();
    let o = check(&dir, &g, &[]);
    assert_clean_error(&o, 2, "no values compared");
    assert!(!text(&o.stdout).contains("PARITY OK"));
}

#[test]
fn sentence_bert_max_seq_length_0_is_rejected() {
    let t = edited(&fixture("bert_tiny"), "sentence_bert_config.json", |v| {
        v["max_seq_length"] = Value::from(0);
    });
    let o = run(&mut kin(&["embed", "--model", &dir_arg(&t)]), "hello\n");
    assert_clean_error(&o, 2, "max_seq_length");
    assert!(o.stdout.is_empty());
}

#[test]
fn modules_json_path_escaping_the_model_directory_is_rejected() {
    for bad in ["../1_Pooling", "/etc", "1_Pooling/../../x"] {
        let t = edited(&fixture("bert_tiny"), "modules.json", |v| {
            for m in v.as_array_mut().unwrap() {
                if m["type"].as_str().unwrap().ends_with("Pooling") {
                    m["path"] = Value::from(bad);
                }
            }
        });
        let o = run(&mut kin(&["embed", "--model", &dir_arg(&t)]), "hello\n");
        assert_clean_error(&o, 2, "leaves the model directory");
    }
}

#[test]
fn nomic_n_embd_2_pow_62_does_not_overflow() {
    // `n_inner` defaulted to `4 * n_embd` before the sizes were checked: an overflow (a panic
    // with overflow checks, a wrap in release).
    let t = edited(&fixture("nomic_orig"), "config.json", |v| {
        v["n_embd"] = Value::from(1u64 << 62);
        v.as_object_mut().unwrap().remove("n_inner");
    });
    let o = kin_out(&["describe", "--model", &dir_arg(&t)]);
    assert_clean_error(&o, 2, "n_embd");
}
