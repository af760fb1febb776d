//! CLI edges of the second hostile-input audit (issue 30): negative numbers reach each
//! option's own check (which names it) instead of clap's "unexpected argument '-1'", a thread
//! count past the machine's limit is refused at once, and a decoder whose weights hold NaN
//! exits 2 with a message instead of printing token 0 forever.

mod common;
use common::*;
use std::time::{Duration, Instant};

const LLAMA: &str = "tests/decoder_fixtures/llama_gqa";
const BERT_GGUF: &str = "tests/fixtures/gguf/encoders/bert_tiny.f32.gguf";

fn generate(extra: &[&str]) -> std::process::Output {
    let model = root().join(LLAMA);
    let mut args = vec![
        "generate",
        "--model",
        model.to_str().unwrap(),
        "--prompt-ids",
        "1 2 3",
        "--max-tokens",
        "2",
    ];
    args.extend_from_slice(extra);
    run(&mut kin(&args), "")
}

#[test]
fn negative_numbers_are_checked_by_the_option_that_takes_them() {
    for (flag, value, needle) in [
        ("--temperature", "-1", "`temperature` = -1"),
        ("--top-p", "-0.5", "`top_p` = -0.5"),
        ("--seed", "-1", "'--seed <SEED>'"),
        ("--max-tokens", "-3", "'--max-tokens <MAX_TOKENS>'"),
    ] {
        let o = generate(&[flag, value]);
        assert_clean_error(&o, 2, needle);
        assert!(
            !text(&o.stderr).contains("unexpected argument"),
            "{flag} {value}: {}",
            text(&o.stderr)
        );
    }
    let model = root().join(BERT_GGUF);
    let o = run(
        &mut kin_on("embed", &model, &["--dimensions", "-1"]),
        "hello\n",
    );
    assert_clean_error(&o, 2, "'--dimensions <DIMENSIONS>'");
    assert!(!text(&o.stderr).contains("unexpected argument"));
}

#[test]
fn a_thread_count_past_the_machines_limit_is_refused_at_once() {
    let t0 = Instant::now();
    assert_clean_error(&generate(&["--threads", "1000000"]), 2, "at most");
    let model = root().join(LLAMA);
    let o = run(
        kin_on("generate", &model, &["--prompt-ids", "1"]).env("KIN_INFER_THREADS", "1000000"),
        "",
    );
    assert_clean_error(&o, 2, "KIN_INFER_THREADS=1000000");
    // Before the cap, a million threads took 70 s to spawn before failing.
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
}

#[test]
fn nan_weights_in_a_decoder_exit_2_instead_of_generating() {
    let tmp = tempfile::tempdir().unwrap();
    let src = root().join(LLAMA);
    for e in std::fs::read_dir(&src).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), tmp.path().join(e.file_name())).unwrap();
    }
    // Every F32 value of the file after the header set to NaN: no finite logit survives.
    let path = tmp.path().join("model.safetensors");
    let mut b = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    let start = (8 + n).next_multiple_of(4);
    for w in b[start..].chunks_exact_mut(4) {
        w.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&path, b).unwrap();
    let o = run(
        &mut kin_on(
            "generate",
            tmp.path(),
            &["--prompt-ids", "1 2 3", "--max-tokens", "4"],
        ),
        "",
    );
    assert_clean_error(&o, 2, "non-finite");
    assert!(text(&o.stdout).trim().is_empty(), "{}", text(&o.stdout));
}

#[test]
fn a_bench_prompt_past_the_context_says_so() {
    // It used to say "--prompt-tokens and --decode-tokens must be at least 1".
    let model = root().join(LLAMA);
    let o = run(
        &mut kin_on("bench", &model, &["--prompt-tokens", "999999999"]),
        "",
    );
    assert_clean_error(&o, 2, "--prompt-tokens 999999999 leaves no room to decode");
}
