//! Backend selection as a user meets it in the default build (no GPU feature): `--backend` and
//! `KIN_INFER_BACKEND` choices, `KIN_INFER_FORCE_CPU`, the seed's `KIN_INFER_CPU_BACKEND`,
//! and `devices`. An unavailable or unknown choice is exit 2 with the reason; the GPU
//! backends themselves are tested by scripts/test-gpu.sh.

mod common;

use common::*;

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "stderr: {}", text(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn describe() -> std::process::Command {
    let dir = fixture("bert_tiny");
    kin(&["describe", "--json", "--model", dir.to_str().unwrap()])
}

#[test]
fn the_default_build_computes_on_the_cpu_and_says_so() {
    let v = json(&run(&mut describe(), ""));
    assert_eq!(v["backend"], "cpu");
    assert!(v["device"].as_str().unwrap().starts_with("CPU ("), "{v}");
    let v = json(&run(&mut kin(&["devices", "--json"]), ""));
    assert_eq!(v["selected"]["backend"], "cpu");
    assert_eq!(v["gpus"].as_array().unwrap().len(), 0);
    assert_eq!(v["features"]["wgpu"], false);
    let o = run(&mut kin(&["devices"]), "");
    assert!(
        text(&o.stdout).contains("this build has no GPU backend"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn an_unavailable_or_unknown_backend_is_exit_2() {
    for b in ["wgpu", "cuda"] {
        let o = run(describe().env("KIN_INFER_BACKEND", b), "");
        assert_clean_error(&o, 2, "not in this build");
        let o = run(describe().args(["--backend", b]), "");
        assert_clean_error(&o, 2, "not in this build");
    }
    let o = run(describe().args(["--backend", "tpu"]), "");
    assert_clean_error(&o, 2, "unknown backend `tpu`");
    let o = run(describe().env("KIN_INFER_BACKEND", "tpu"), "");
    assert_clean_error(&o, 2, "unknown backend `tpu`");
}

#[test]
fn force_cpu_and_explicit_cpu_win() {
    let v = json(&run(
        describe()
            .env("KIN_INFER_FORCE_CPU", "1")
            .env("KIN_INFER_BACKEND", "wgpu"),
        "",
    ));
    assert_eq!(v["backend"], "cpu");
    for choice in ["cpu", "auto"] {
        let v = json(&run(describe().args(["--backend", choice]), ""));
        assert_eq!(v["backend"], "cpu", "{choice}");
    }
}

#[test]
fn the_seeds_cpu_backend_switch_accepts_only_pure_rust() {
    let v = json(&run(
        describe().env("KIN_INFER_CPU_BACKEND", "pure-rust"),
        "",
    ));
    assert_eq!(v["backend"], "cpu");
    let o = run(describe().env("KIN_INFER_CPU_BACKEND", "accelerate"), "");
    assert_clean_error(&o, 2, "the only CPU backend is `pure-rust`");
}
