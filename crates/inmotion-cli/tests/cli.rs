//! The `inmotion-infer` binary: output formats, exit codes (0 ok, 1 parity failed, 2 bad
//! input/artifact/golden), nothing on stdout on error, and every command on the fixtures.

use inmotion::meta::{Family, Meta};
use inmotion::writer::{self, Tensor};
use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_inmotion-infer"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion")
}

fn art(name: &str) -> PathBuf {
    fixtures().join(name)
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    let mut c = bin()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    c.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    c.wait_with_output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit 2, a message naming `needle` on stderr, nothing on stdout.
fn assert_fails(o: &Output, needle: &str) {
    assert_eq!(
        o.status.code(),
        Some(2),
        "stdout {} stderr {}",
        out(o),
        err(o)
    );
    assert!(o.stdout.is_empty(), "partial stdout: {}", out(o));
    assert!(
        err(o).contains(needle),
        "stderr lacks `{needle}`: {}",
        err(o)
    );
}

fn tmp_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn bare_invocation_lists_the_commands() {
    let o = run(&[]);
    let text = out(&o) + &err(&o);
    for c in ["describe", "predict", "stream", "bench", "check", "eval"] {
        assert!(text.contains(c), "{text}");
    }
    assert_fails(&run(&["describe"]), "--artifact");
}

#[test]
fn check_passes_on_every_fixture_in_the_documented_format() {
    let root = fixtures();
    let mut n = 0;
    for dir in [root.clone(), root.join("conformance")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if !p.join("golden.json").is_file() {
                continue;
            }
            let o = run(&["check", "--artifact", s(&p), "--golden", s(&p)]);
            let text = out(&o);
            assert_eq!(
                o.status.code(),
                Some(0),
                "{}: {text} {}",
                p.display(),
                err(&o)
            );
            let lines: Vec<&str> = text.lines().collect();
            assert!(lines[0].starts_with("cases      : "), "{text}");
            assert!(lines[1].starts_with("max |diff| : "), "{text}");
            assert!(lines[2].starts_with("tolerance  : "), "{text}");
            assert_eq!(lines[3], "PARITY OK");
            n += 1;
        }
    }
    assert!(n >= 15, "only {n} fixture artifacts");
}

#[test]
fn check_failures_and_malformed_goldens() {
    let a = art("lejepa_fp32");
    let tmp = tempfile::tempdir().unwrap();
    let mut g: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("golden.json")).unwrap()).unwrap();
    // off by more than tol → the case, PARITY FAILED, exit 1
    let mut bad = g.clone();
    bad["cases"][2]["expected"][1] = json!(bad["cases"][2]["expected"][1].as_f64().unwrap() + 0.5);
    let p = tmp_file(tmp.path(), "bad.json", &bad.to_string());
    let o = run(&["check", "--artifact", s(&a), "--golden", s(&p)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        out(&o).contains("case 2") && out(&o).trim_end().ends_with("PARITY FAILED"),
        "{}",
        out(&o)
    );
    let o = run(&["check", "--artifact", s(&a), "--golden", s(&p), "--json"]);
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["result"], "PARITY FAILED");
    // no tol → exit 2
    g.as_object_mut().unwrap().remove("tol");
    let p = tmp_file(tmp.path(), "notol.json", &g.to_string());
    assert_fails(
        &run(&["check", "--artifact", s(&a), "--golden", s(&p)]),
        "`tol`",
    );
    // empty cases, wrong row width
    g["tol"] = json!(1e-4);
    let mut e = g.clone();
    e["cases"] = json!([]);
    let p = tmp_file(tmp.path(), "empty.json", &e.to_string());
    assert_fails(
        &run(&["check", "--artifact", s(&a), "--golden", s(&p)]),
        "empty",
    );
    let mut w = g.clone();
    w["cases"][0]["input"][3] = json!([1.0, 2.0]);
    let p = tmp_file(tmp.path(), "width.json", &w.to_string());
    assert_fails(
        &run(&["check", "--artifact", s(&a), "--golden", s(&p)]),
        "cases[0].input[3]",
    );
}

#[test]
fn describe_prints_the_architecture() {
    let o = run(&["describe", "--artifact", s(&art("t_jepa_q4"))]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let t = out(&o);
    for k in [
        "model      : t_jepa",
        "family     : transformer",
        "n_tokens   : 42",
        "n_reg      : 2",
        "tokenizer",
        "tail",
        "quantization : {",
    ] {
        assert!(t.contains(k), "{k}: {t}");
    }
    let o = run(&["describe", "--artifact", s(&art("sigreg_fp32")), "--json"]);
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["family"], "cnn");
    assert!(v["num_filters"].as_u64().unwrap() > 0);
}

#[test]
fn predict_text_json_raw_and_errors() {
    let a = art("cf_jepa_int8");
    let tmp = tempfile::tempdir().unwrap();
    let vals: Vec<String> = (0..40)
        .map(|i| format!("{:.2}", (i as f32 * 0.3).sin()))
        .collect();
    let good = tmp_file(tmp.path(), "w.txt", &vals.join(", "));
    let o = run(&["predict", "--artifact", s(&a), "--input", s(&good)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let t = out(&o);
    assert!(
        t.contains("logits") && t.contains("probabilities") && t.contains("predicted     : class "),
        "{t}"
    );
    let o = run(&[
        "predict",
        "--artifact",
        s(&a),
        "--input",
        s(&good),
        "--json",
    ]);
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    assert_eq!(v["logits"].as_array().unwrap().len(), 4);
    assert!(v["label"].is_string());

    let short = tmp_file(tmp.path(), "s.txt", &vals[..39].join(" "));
    assert_fails(
        &run(&["predict", "--artifact", s(&a), "--input", s(&short)]),
        "expected 40 values (seq_len 10 x in_channels 4), found 39",
    );
    let nan = tmp_file(tmp.path(), "n.txt", &(vals[..39].join(" ") + " nan"));
    assert_fails(
        &run(&["predict", "--artifact", s(&a), "--input", s(&nan)]),
        "not finite",
    );

    let raw = tmp_file(
        tmp.path(),
        "r.txt",
        "-40 -41 -45 -50 -52 -55 -53 -60 -61 -58",
    );
    let o = run(&["predict", "--artifact", s(&a), "--input", s(&raw), "--raw"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_fails(
        &run(&[
            "predict",
            "--artifact",
            s(&art("conformance/ts_jepa_no_preprocess")),
            "--input",
            s(&raw),
            "--raw",
        ]),
        "preprocess",
    );
}

#[test]
fn stream_timesteps_windows_and_errors() {
    let a = art("lejepa_q4");
    let rows: Vec<String> = (0..12)
        .map(|t| format!("{} {} 0.1 -0.2", t as f32 * 0.1, -(t as f32) * 0.05))
        .collect();
    let input = format!("# comment\n\n{}\n", rows.join("\n"));
    let o = run_stdin(&["stream", "--artifact", s(&a)], &input);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let lines: Vec<String> = out(&o).lines().map(String::from).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with("t=10  ")
            && lines[0].contains("confidence=")
            && lines[0].contains("[AA "),
        "{}",
        lines[0]
    );
    assert!(lines[2].starts_with("t=12  "));
    assert!(err(&o).contains("3 classifications"));

    // a whole-window line counts seq_len and replaces the buffer
    let window: Vec<String> = (0..40).map(|i| format!("{}", i as f32 * 0.01)).collect();
    let o = run_stdin(
        &["stream", "--artifact", s(&a), "--json"],
        &format!("{}\n{}\n", window.join(","), rows[0]),
    );
    let ls: Vec<Value> = out(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(ls.len(), 2);
    assert_eq!(ls[0]["sample"], 10);
    assert_eq!(ls[1]["sample"], 11);
    for k in ["class", "label", "confidence", "probabilities"] {
        assert!(!ls[0][k].is_null(), "{k}");
    }

    // bad arity and non-finite name the line
    let o = run_stdin(&["stream", "--artifact", s(&a)], "1 2 3 4\n1 2 3\n");
    assert_eq!(o.status.code(), Some(2));
    assert!(
        err(&o).contains("line 2") && err(&o).contains("3 values"),
        "{}",
        err(&o)
    );
    let o = run_stdin(&["stream", "--artifact", s(&a)], "1 2 3 inf\n");
    assert_eq!(o.status.code(), Some(2));
    assert!(err(&o).contains("line 1") && err(&o).contains("not finite"));

    // --raw: one reading per line
    let raw: String = (0..11).map(|i| format!("{}\n", -45.0 - i as f32)).collect();
    let o = run_stdin(&["stream", "--artifact", s(&a), "--raw"], &raw);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(out(&o).lines().count(), 2);
}

#[test]
fn bench_json_has_the_record_keys() {
    let o = run(&[
        "bench",
        "--artifact",
        s(&art("sigreg_q4")),
        "--iterations",
        "5",
        "--warmup",
        "1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: Value = serde_json::from_str(&out(&o)).unwrap();
    for k in [
        "min_ms",
        "median_ms",
        "mean_ms",
        "p95_ms",
        "max_ms",
        "throughput_per_s",
        "model",
        "quantization",
        "kernel_tier",
        "artifact_sha256",
        "git_revision",
    ] {
        assert!(!v[k].is_null(), "{k}: {v}");
    }
    assert_eq!(v["model"], "sigreg");
    assert_eq!(v["artifact_sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn eval_reproduces_the_recorded_fp32_mcc() {
    let data = fixtures().join("data/test.csv");
    let baseline: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("baseline_mcc.json")).unwrap(),
    )
    .unwrap();
    for f in Family::ALL {
        let a = art(&format!("{}_fp32", f.name()));
        let o = run(&["eval", "--artifact", s(&a), "--data", s(&data), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}", err(&o));
        let v: Value = serde_json::from_str(&out(&o)).unwrap();
        let want = baseline["mcc"][f.name()].as_f64().unwrap();
        let got = v["mcc"].as_f64().unwrap();
        assert!(
            (got - want).abs() < 0.005,
            "{f:?}: rust {got} python {want}"
        );
        assert_eq!(v["confusion"].as_array().unwrap().len(), 4);
    }
    let o = run(&[
        "eval",
        "--artifact",
        s(&art("lejepa_q4")),
        "--data",
        s(&data),
    ]);
    assert!(out(&o).contains("mcc        : ") && out(&o).contains("confusion"));
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp_file(
        tmp.path(),
        "b.csv",
        "1,2,3,4,5,6,7,8,9,10,label\n1,2,3,4,5,6,7,8,9,10,ZZ\n",
    );
    assert_fails(
        &run(&[
            "eval",
            "--artifact",
            s(&art("lejepa_q4")),
            "--data",
            s(&bad),
        ]),
        ":2: label `ZZ`",
    );
}

#[test]
fn malformed_artifacts_exit_2_naming_the_fault() {
    let tmp = tempfile::tempdir().unwrap();
    let hp = json!({"d_model": 8, "n_heads": 2, "num_layers": 1, "dim_feedforward": 8, "head_hidden": 4});
    let v = writer::meta_json(Family::CfJepa, hp, json!({"scheme": "fp32"}));
    let meta = Meta::from_value(&v, Path::new("meta.json")).unwrap();
    let t = writer::random_tensors(&meta, 1);
    let d = tmp.path().join("a");
    let describe = |d: &Path| run(&["describe", "--artifact", s(d)]);
    writer::write_artifact(&d, &v, &t).unwrap();
    assert_eq!(describe(&d).status.code(), Some(0));

    let bytes = std::fs::read(d.join("model.safetensors")).unwrap();
    std::fs::write(d.join("model.safetensors"), &bytes[..bytes.len() / 2]).unwrap();
    assert_fails(&describe(&d), "model.safetensors");

    let mut t2 = t.clone();
    t2.remove("encoder.norm.bias");
    writer::write_artifact(&d, &v, &t2).unwrap();
    assert_fails(&describe(&d), "`encoder.norm.bias`: missing");

    let mut t2 = t.clone();
    t2.insert("stray".into(), Tensor::f32(vec![1], vec![1.0]));
    writer::write_artifact(&d, &v, &t2).unwrap();
    assert_fails(&describe(&d), "`stray`: extra");

    let mut t2 = t.clone();
    t2.insert(
        "encoder.norm.bias".into(),
        Tensor::f32(vec![9], vec![0.0; 9]),
    );
    writer::write_artifact(&d, &v, &t2).unwrap();
    assert_fails(&describe(&d), "`encoder.norm.bias`: shape [9]");

    let mut v2 = v.clone();
    v2["weights_sha256"] = json!("ab".repeat(32));
    writer::write_artifact(&d, &v2, &t).unwrap();
    assert_fails(&describe(&d), "weights_sha256 mismatch");

    let mut v2 = v.clone();
    v2["model"] = json!("rnn");
    writer::write_artifact(&d, &v2, &t).unwrap();
    assert_fails(&describe(&d), "unknown model `rnn`");

    let mut v2 = v.clone();
    v2.as_object_mut().unwrap().remove("in_channels");
    writer::write_artifact(&d, &v2, &t).unwrap();
    assert_fails(&describe(&d), "field `in_channels`: missing");

    assert_fails(&describe(&tmp.path().join("absent")), "not a directory");
}
