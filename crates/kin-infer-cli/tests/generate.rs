//! `kin-infer generate`: greedy output equal to the goldens' `generate` cases (LLaMA fixtures,
//! token ids in and out), the `--json` stream and summary, seeded sampling reproducible, text
//! streaming and stop strings through a tokenizer, and exit 2 with a clear message for bad
//! flags, a text prompt without a tokenizer, a prompt longer than the context and unknown ids.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn decoder_fixture(name: &str) -> PathBuf {
    root().join("tests/decoder_fixtures").join(name)
}

fn gen(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["generate", "--model", dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    run(&mut kin(&args), "")
}

fn ids_str(v: &Value) -> String {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn json_lines(o: &std::process::Output) -> Vec<Value> {
    text(&o.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

#[test]
fn greedy_output_matches_the_golden_generate_cases() {
    for name in ["llama_gqa", "llama_mqa"] {
        let dir = decoder_fixture(name);
        let g: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap())
                .unwrap();
        let cfg: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let eos = cfg["eos_token_id"].as_u64();
        let mut cases = 0;
        for case in g["cases"].as_array().unwrap() {
            if case["kind"] != "generate" {
                continue;
            }
            cases += 1;
            let prompt = ids_str(&case["input_ids"][0]);
            let n = case["max_new_tokens"].as_u64().unwrap().to_string();
            let mut want: Vec<u64> = case["expected_tokens"][0]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .collect();
            // The golden does not stop on EOS; the command does.
            if let Some(p) = want.iter().position(|&t| Some(t) == eos) {
                want.truncate(p + 1);
            }
            let want_str = want
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
                .join(" ");

            let o = gen(&dir, &["--prompt-ids", &prompt, "--max-tokens", &n]);
            assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
            assert_eq!(
                text(&o.stdout).trim_end(),
                want_str,
                "{name} {}",
                case["name"]
            );
            assert!(text(&o.stderr).contains("stop: max_tokens") || want.len() < 8);

            // --json, with 2 threads: the same ids, one object per token, then the summary.
            let o = gen(
                &dir,
                &[
                    "--prompt-ids",
                    &prompt,
                    "--max-tokens",
                    &n,
                    "--json",
                    "--threads",
                    "2",
                ],
            );
            assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
            let lines = json_lines(&o);
            assert_eq!(lines.len(), want.len() + 1);
            for (i, l) in lines[..want.len()].iter().enumerate() {
                assert_eq!(l["event"], "token");
                assert_eq!(l["index"], i);
                assert_eq!(l["id"], want[i]);
            }
            let s = lines.last().unwrap();
            assert_eq!(s["event"], "summary");
            assert_eq!(s["ids"], serde_json::json!(want));
            assert_eq!(s["stop_reason"], "max_tokens");
            assert!(s["text"].is_null());
            assert!(s["prefill_tokens_per_s"].as_f64().unwrap() > 0.0);
            assert!(s["decode_tokens_per_s"].as_f64().unwrap() > 0.0);
            assert_eq!(
                s["prompt_tokens"],
                case["input_ids"][0].as_array().unwrap().len()
            );
        }
        assert!(cases > 0, "{name} has generate cases");
    }
}

#[test]
fn seeded_sampling_is_reproducible_and_context_ends_the_run() {
    let dir = decoder_fixture("llama_gqa");
    let args = [
        "--prompt-ids",
        "5 6 7",
        "--max-tokens",
        "12",
        "--temperature",
        "1.3",
        "--top-k",
        "50",
        "--top-p",
        "0.95",
        "--min-p",
        "0.01",
        "--repeat-penalty",
        "1.1",
    ];
    let out = |seed: &str| {
        let mut a = args.to_vec();
        a.extend_from_slice(&["--seed", seed]);
        let o = gen(&dir, &a);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    assert_eq!(out("1"), out("1"));
    let all: Vec<String> = (1..5).map(|s| out(&s.to_string())).collect();
    assert!(all.iter().any(|x| x != &all[0]), "{all:?}");

    // 60-token prompt, 64 positions: 5 tokens, then the context is full.
    let long = (0..60)
        .map(|i| (3 + i % 100).to_string())
        .collect::<Vec<_>>()
        .join(" ");
    let o = gen(&dir, &["--prompt-ids", &long, "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let s = json_lines(&o).pop().unwrap();
    assert_eq!(s["stop_reason"], "context");
    assert_eq!(s["generated_tokens"], 5);
}

#[test]
fn errors_exit_2_with_a_clear_message() {
    let dir = decoder_fixture("llama_gqa");
    let long = (0..65).map(|_| "5").collect::<Vec<_>>().join(" ");
    for (args, needle) in [
        (vec!["--prompt", "hello"], "tokenizer.json"),
        (vec!["--prompt-ids", "1 x 3"], "`x` is not a token id"),
        (vec!["--prompt-ids", ""], "no token ids"),
        (vec!["--prompt-ids", "1 128"], "outside the vocabulary"),
        (vec!["--prompt-ids", &long], "exceeds the model's context"),
        (vec!["--prompt-ids", "1 2", "--stop", "x"], "tokenizer"),
        (vec!["--prompt-ids", "1 2", "--top-p", "1.5"], "top_p"),
        (
            vec!["--prompt-ids", "1 2", "--temperature=-1"],
            "temperature",
        ),
        (vec!["--prompt-ids", "1 2", "--top-k", "many"], "--top-k"),
        (vec![], "--prompt"),
        (
            vec!["--prompt", "a", "--prompt-ids", "1"],
            "cannot be used with",
        ),
        (
            vec!["--prompt-file", "/nonexistent/p.txt"],
            "/nonexistent/p.txt",
        ),
    ] {
        let o = gen(&dir, &args);
        assert_clean_error(&o, 2, needle);
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
    }
    let o = gen(Path::new("/nonexistent/model"), &["--prompt-ids", "1"]);
    assert_clean_error(&o, 2, "/nonexistent/model");
    // An encoder is not a decoder, and the message names the commands that take it.
    let o = gen(&fixture("roberta_tiny"), &["--prompt-ids", "1"]);
    assert_clean_error(&o, 2, "is an encoder (roberta)");
    assert_clean_error(&o, 2, "use `embed` or `serve`");
}

/// The LLaMA fixture plus a word-level tokenizer.json: "w0" … "w127", ids 0 … 127, decoded
/// joined by spaces.
fn with_tokenizer() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = decoder_fixture("llama_gqa");
    for f in ["config.json", "model.safetensors"] {
        std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
    }
    let vocab: serde_json::Map<String, Value> = (0..128)
        .map(|i| (format!("w{i}"), Value::from(i)))
        .collect();
    let tok = serde_json::json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null,
        "decoder": null,
        "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "w0"}
    });
    std::fs::write(tmp.path().join("tokenizer.json"), tok.to_string()).unwrap();
    tmp
}

#[test]
fn text_prompts_stream_text_and_stop_strings_cut_it() {
    let tmp = with_tokenizer();
    let dir = tmp.path();
    let prompt = "w121 w10 w100 w100 w28 w113 w123";
    let want = [79, 65, 106, 47, 100, 61, 73, 40];
    let want_text = want
        .iter()
        .map(|i| format!("w{i}"))
        .collect::<Vec<_>>()
        .join(" ");

    let o = gen(dir, &["--prompt", prompt, "--max-tokens", "8"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), format!("{want_text}\n"));

    let pf = dir.join("prompt.txt");
    std::fs::write(&pf, format!("{prompt}\n")).unwrap();
    let o = gen(
        dir,
        &[
            "--prompt-file",
            pf.to_str().unwrap(),
            "--max-tokens",
            "8",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines = json_lines(&o);
    let streamed: String = lines[..8]
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, want_text);
    assert_eq!(lines[8]["text"], want_text.as_str());

    // A stop string spanning the 4th and 5th tokens: the text ends before it, and the part
    // of it already generated ("7") is never printed.
    let o = gen(
        dir,
        &[
            "--prompt",
            prompt,
            "--max-tokens",
            "8",
            "--stop",
            "zz",
            "--stop",
            "7 w1",
            "--json",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let lines = json_lines(&o);
    let s = lines.last().unwrap();
    assert_eq!(s["stop_reason"], "stop_string");
    assert_eq!(s["ids"], serde_json::json!([79, 65, 106, 47, 100]));
    assert_eq!(s["text"], "w79 w65 w106 w4");
    let streamed: String = lines[..lines.len() - 1]
        .iter()
        .map(|l| l["text"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "w79 w65 w106 w4");
}

/// [`with_tokenizer`] plus a BOS post-processor (`w1` before every plain prompt) and
/// `tokenizer_config.json` holding `chat_template` (written as given: a string or a list).
fn with_chat_template(template: Value) -> tempfile::TempDir {
    let tmp = with_tokenizer();
    let p = tmp.path().join("tokenizer.json");
    let mut tok: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    tok["post_processor"] = serde_json::json!({
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "w1", "type_id": 0}},
                   {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "w1", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"w1": {"id": "w1", "ids": [1], "tokens": ["w1"]}}
    });
    std::fs::write(&p, tok.to_string()).unwrap();
    let cfg = serde_json::json!({
        "bos_token": {"content": "w1", "lstrip": false, "normalized": false,
                      "rstrip": false, "single_word": false},
        "eos_token": "w2",
        "chat_template": template,
    });
    std::fs::write(tmp.path().join("tokenizer_config.json"), cfg.to_string()).unwrap();
    tmp
}

fn summary(o: &std::process::Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    json_lines(o).pop().unwrap()
}

/// ChatML-like: a turn is `w10` (system) / `w11` (user) / `w12` (assistant), the content, then
/// the EOS `w2`; the generation prompt is `w12`.
const CHATML_LIKE: &str = "{{ bos_token }} {% for m in messages %}\
{% if m['role'] == 'system' %}w10{% elif m['role'] == 'user' %}w11{% else %}w12{% endif %} \
{{ m['content'].strip() }} {{ eos_token }}\n{% endfor %}\
{% if add_generation_prompt %}w12{% endif %}";

#[test]
fn chat_renders_the_template_and_adds_no_second_bos() {
    let tmp = with_chat_template(Value::from(CHATML_LIKE));
    let dir = tmp.path();
    // Plain prompts get the post-processor's BOS.
    let s = summary(&gen(
        dir,
        &["--prompt", "w5 w6", "--max-tokens", "3", "--json"],
    ));
    assert_eq!(s["prompt_tokens"], 3);

    // The template writes the BOS itself: one w1, not two.
    let want: [&[u32]; 2] = [&[1, 11, 5, 6, 2, 12], &[1, 10, 40, 41, 2, 11, 5, 6, 2, 12]];
    for (extra, ids) in [(vec![], want[0]), (vec!["--system", " w40 w41 "], want[1])] {
        let mut args = vec![
            "--prompt",
            " w5 w6",
            "--chat",
            "--max-tokens",
            "6",
            "--json",
        ];
        args.extend_from_slice(&extra);
        let chat = summary(&gen(dir, &args));
        let ids_arg = ids
            .iter()
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(" ");
        let direct = summary(&gen(
            dir,
            &["--prompt-ids", &ids_arg, "--max-tokens", "6", "--json"],
        ));
        assert_eq!(chat["prompt_tokens"], ids.len(), "{extra:?}");
        assert_eq!(chat["ids"], direct["ids"], "{extra:?}");
        assert_eq!(chat["text"], direct["text"], "{extra:?}");
    }
}

#[test]
fn chat_template_lists_raise_exception_and_missing_templates() {
    // A list of named templates: "default" is used. Like LLaMA 2 / Gemma templates, it
    // raises on a system message and on roles that do not alternate.
    let llama2_like = "{% if messages[0]['role'] == 'system' %}\
{{ raise_exception('System role not supported') }}{% endif %}\
{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}\
{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}\
{% endif %}{% if m['role'] == 'user' %}{{ bos_token }} w20 {{ m['content'] }} w21{% endif %}\
{% endfor %}";
    let tmp = with_chat_template(serde_json::json!([
        {"name": "tool_use", "template": "w99"},
        {"name": "default", "template": llama2_like},
    ]));
    let dir = tmp.path();
    let s = summary(&gen(
        dir,
        &["--prompt", "w7", "--chat", "--max-tokens", "2", "--json"],
    ));
    let d = summary(&gen(
        dir,
        &["--prompt-ids", "1 20 7 21", "--max-tokens", "2", "--json"],
    ));
    assert_eq!(s["prompt_tokens"], 4);
    assert_eq!(s["ids"], d["ids"]);

    let o = gen(dir, &["--prompt", "w7", "--chat", "--system", "w8"]);
    assert_clean_error(&o, 2, "System role not supported");
    assert!(o.stdout.is_empty());

    // No "default" among the named templates.
    let tmp = with_chat_template(serde_json::json!([{"name": "rag", "template": "w9"}]));
    let o = gen(tmp.path(), &["--prompt", "w7", "--chat"]);
    assert_clean_error(&o, 2, "default");

    // A template that does not parse.
    let tmp = with_chat_template(Value::from("{% for m in messages %}"));
    let o = gen(tmp.path(), &["--prompt", "w7", "--chat"]);
    assert_clean_error(&o, 2, "chat template");

    // No tokenizer_config.json, or one without chat_template.
    let tmp = with_tokenizer();
    let o = gen(tmp.path(), &["--prompt", "w7", "--chat"]);
    assert_clean_error(&o, 2, "tokenizer_config.json");
    std::fs::write(
        tmp.path().join("tokenizer_config.json"),
        "{\"bos_token\": \"w1\"}",
    )
    .unwrap();
    let o = gen(tmp.path(), &["--prompt", "w7", "--chat"]);
    assert_clean_error(&o, 2, "no chat_template");

    // Flag combinations.
    let o = gen(tmp.path(), &["--prompt-ids", "1 2", "--chat"]);
    assert_clean_error(&o, 2, "cannot be used with");
    let o = gen(tmp.path(), &["--prompt", "w7", "--system", "w8"]);
    assert_clean_error(&o, 2, "--chat");
}

/// transformers 5 saves the template as `chat_template.jinja` beside a `tokenizer_config.json`
/// that has no `chat_template` (it used to fail with "has no chat_template"); the processor
/// layout `chat_template.json` is read too; the `.jinja` file wins over both, as in
/// transformers.
#[test]
fn chat_template_jinja_written_by_transformers_5() {
    let tmp = with_chat_template(Value::Null);
    let dir = tmp.path();
    let cfg = dir.join("tokenizer_config.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&cfg).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(&cfg, v.to_string()).unwrap();
    let direct = summary(&gen(
        dir,
        &[
            "--prompt-ids",
            "1 11 5 6 2 12",
            "--max-tokens",
            "4",
            "--json",
        ],
    ));
    let chat = |dir: &Path| {
        summary(&gen(
            dir,
            &["--prompt", "w5 w6", "--chat", "--max-tokens", "4", "--json"],
        ))
    };
    // chat_template.json alone.
    std::fs::write(
        dir.join("chat_template.json"),
        serde_json::json!({ "chat_template": CHATML_LIKE }).to_string(),
    )
    .unwrap();
    let s = chat(dir);
    assert_eq!(s["prompt_tokens"], 6);
    assert_eq!(s["ids"], direct["ids"]);
    // chat_template.jinja takes precedence (the .json now holds a template that would fail).
    std::fs::write(
        dir.join("chat_template.json"),
        serde_json::json!({ "chat_template": "{{ raise_exception('json used') }}" }).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("chat_template.jinja"), CHATML_LIKE).unwrap();
    let s = chat(dir);
    assert_eq!(s["prompt_tokens"], 6);
    assert_eq!(s["ids"], direct["ids"]);
    // An empty .jinja is an error naming the file.
    std::fs::write(dir.join("chat_template.jinja"), "  \n").unwrap();
    let o = gen(dir, &["--prompt", "w5", "--chat"]);
    assert_clean_error(&o, 2, "chat_template.jinja");
}

#[test]
fn bench_reports_prefill_and_decode_for_decoders() {
    let dir = decoder_fixture("llama_gqa");
    let d = dir.to_str().unwrap();
    let args = [
        "bench",
        "--model",
        d,
        "--prompt-tokens",
        "20",
        "--decode-tokens",
        "8",
        "--repeat",
        "2",
        "--threads",
        "1",
        "--json",
    ];
    let o = run(&mut kin(&args), "");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let v: Value = serde_json::from_str(text(&o.stdout).trim()).unwrap();
    assert_eq!(v["prompt_tokens"], 20);
    assert_eq!(v["decode_tokens"], 8);
    assert_eq!(v["threads"], 1);
    assert_eq!(v["model_type"], "llama");
    for k in ["prefill", "decode"] {
        let f = |s: &str| v[format!("{k}_tokens_per_s_{s}")].as_f64().unwrap();
        assert!(
            0.0 < f("min") && f("min") <= f("median") && f("median") <= f("max"),
            "{v}"
        );
    }
    assert!(v["simd_tier"].is_string() && v["load_ms"].as_f64().is_some());

    // Defaults (128 + 64) shrink to the 64-token context; explicit lengths must fit.
    let o = ok(&["bench", "--model", d, "--repeat", "1"]);
    assert!(text(&o.stdout).contains("decode tokens/s"));
    let o = run(
        &mut kin(&[
            "bench",
            "--model",
            d,
            "--prompt-tokens",
            "60",
            "--decode-tokens",
            "10",
        ]),
        "",
    );
    assert_clean_error(&o, 2, "exceed the model's context of 64");

    // Encoders still need --input.
    let enc = fixture("roberta_tiny");
    let o = run(&mut kin(&["bench", "--model", enc.to_str().unwrap()]), "");
    assert_clean_error(&o, 2, "--input");
}
