//! Errors that point to the fix (issue 35): a model of the wrong kind names its family and the
//! command that runs it, a `.jsonl` input read as lines is warned about, contradictory flags
//! are refused. Fixtures only: no real model needed.

mod common;

use common::*;

fn root_path(rel: &str) -> String {
    root().join(rel).display().to_string()
}

#[test]
fn a_decoder_given_to_embed_or_plan_names_its_family_and_generate() {
    let llama = root_path("tests/decoder_fixtures/llama_gqa");
    let gguf = root_path("tests/fixtures/gguf/decoders/qwen2_bias.q4_1.gguf");
    let snippets = root_path("examples/snippets.txt");
    for (args, family) in [
        (
            vec!["embed", "--model", &llama, "--input", &snippets],
            "(llama)",
        ),
        (vec!["plan", "--model", &llama], "(llama)"),
        (
            vec!["embed", "--model", &gguf, "--input", &snippets],
            "(qwen2)",
        ),
        (vec!["plan", "--model", &gguf], "(qwen2)"),
    ] {
        let o = run(&mut kin(&args), "");
        assert_clean_error(&o, 2, &format!("is a decoder {family}"));
        assert_clean_error(&o, 2, "use `generate` or `serve`");
        assert!(
            !text(&o.stderr).contains("unsupported model_type"),
            "{args:?}: {}",
            text(&o.stderr)
        );
    }
}

#[test]
fn an_encoder_given_to_generate_names_its_family_and_embed() {
    let bert = root_path("tests/fixtures/bert_tiny");
    let o = run(
        &mut kin(&["generate", "--model", &bert, "--prompt-ids", "1 2"]),
        "",
    );
    assert_clean_error(&o, 2, "is an encoder (bert)");
    assert_clean_error(&o, 2, "use `embed` or `serve`");
}

#[test]
fn a_model_type_of_neither_kind_still_lists_the_supported_ones() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("config.json"),
        r#"{"model_type": "frobnitz"}"#,
    )
    .unwrap();
    let d = tmp.path().to_str().unwrap();
    let o = run(&mut kin(&["plan", "--model", d]), "");
    assert_clean_error(&o, 2, "frobnitz");
    assert_clean_error(&o, 2, "xlm-roberta");
}

#[test]
fn jsonl_input_without_the_flag_is_warned_about_not_refused() {
    let m = root_path("tests/server_fixtures/embed_tiny");
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in.jsonl");
    std::fs::write(
        &input,
        "{\"text\": \"fn main() {}\"}\n{\"text\": \"let x = 1;\"}\n",
    )
    .unwrap();
    let i = input.to_str().unwrap();
    let warning = "ends in .jsonl but --jsonl is not set";

    let o = ok(&["embed", "--model", &m, "--input", i]);
    let err = text(&o.stderr);
    assert!(
        err.contains(warning) && err.contains("pass --jsonl"),
        "{err}"
    );
    assert_eq!(text(&o.stdout).lines().count(), 2);

    let o = ok(&["embed", "--model", &m, "--input", i, "--jsonl"]);
    assert!(!text(&o.stderr).contains(warning), "{}", text(&o.stderr));
}

#[test]
fn normalize_and_no_normalize_together_is_a_usage_error() {
    let m = root_path("tests/server_fixtures/embed_tiny");
    let o = run(
        &mut kin(&["embed", "--model", &m, "--normalize", "--no-normalize"]),
        "fn main() {}\n",
    );
    assert_clean_error(&o, 2, "cannot be used with");
    assert!(o.stdout.is_empty());
}
