//! Crafted artifacts and inputs from the hardening audit (issue 10): sizes in meta.json that
//! used to abort on an allocation or overflow, outputs that overflow to NaN yet printed a class,
//! and goldens accepted without `format` or `kind`. Each is exit 2 with a message naming the
//! file and field (or window), nothing on stdout, no panic.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn art(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/inmotion")
        .join(name)
}

fn run(args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut c = Command::new(env!("CARGO_BIN_EXE_inmotion-infer"))
        .args(args)
        .env_remove("KIN_INFER_SIMD")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let _ = c.stdin.take().unwrap().write_all(stdin.as_bytes());
    c.wait_with_output().unwrap()
}

fn assert_fails(o: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "stderr: {err}");
    assert!(
        o.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(!err.contains("panicked"), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr lacks `{n}`: {err}");
    }
}

/// A copy of artifact `name` with `edit` applied to its meta.json.
fn edited(name: &str, edit: impl FnOnce(&mut Value)) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["meta.json", "model.safetensors", "golden.json"] {
        std::fs::copy(art(name).join(f), tmp.path().join(f)).unwrap();
    }
    let p = tmp.path().join("meta.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(&p, v.to_string()).unwrap();
    tmp
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn huge_seq_len_is_rejected_at_load() {
    // 1e8 and 1e12 sized sigreg's scratch (no tensor has a seq_len axis); 2^62 overflowed
    // `seq_len * in_channels`; 1e5 made lejepa's attention scores 40 GB.
    for (name, n) in [
        ("sigreg_fp32", 100_000_000u64),
        ("sigreg_q4", 1_000_000_000_000),
        ("lejepa_fp32", 1 << 62),
        ("lejepa_int8", 100_000),
        ("t_jepa_fp32", u64::MAX),
    ] {
        let t = edited(name, |v| v["seq_len"] = json!(n));
        let o = run(&["describe", "--artifact", s(t.path())], "");
        assert_fails(&o, &["meta.json", "field `seq_len`", "at most 16384"]);
    }
}

#[test]
fn huge_sizes_in_hparams_and_quantization_are_rejected() {
    for (name, field, n) in [
        ("lejepa_fp32", "d_model", 1u64 << 40),
        ("t_jepa_fp32", "n_reg", 1 << 33),
        ("sigreg_fp32", "num_blocks", 1 << 20),
        ("cf_jepa_fp32", "dim_feedforward", 1 << 31),
    ] {
        let t = edited(name, |v| v["hparams"][field] = json!(n));
        let o = run(&["describe", "--artifact", s(t.path())], "");
        assert_fails(&o, &[&format!("field `hparams.{field}`"), "out of range"]);
    }
    let t = edited("lejepa_q4", |v| {
        v["quantization"]["granularity"] = json!("per_group");
        v["quantization"]["group_size"] = json!(1u64 << 63);
    });
    let o = run(&["describe", "--artifact", s(t.path())], "");
    assert_fails(&o, &["field `quantization.group_size`", "out of range"]);
    let t = edited("lejepa_fp32", |v| v["in_channels"] = json!(1u64 << 20));
    let o = run(&["describe", "--artifact", s(t.path())], "");
    assert_fails(&o, &["field `in_channels`", "out of range"]);
}

#[test]
fn run_state_that_cannot_fit_is_a_memory_error_before_any_allocation() {
    // Within every bound, but t_jepa makes a token per value: 262,146 tokens, and their
    // attention scores alone are 256 GiB.
    let t = edited("t_jepa_fp32", |v| {
        v["seq_len"] = json!(4096);
        v["in_channels"] = json!(64);
        v.as_object_mut().unwrap().remove("preprocess");
    });
    let o = run(&["describe", "--artifact", s(t.path())], "");
    assert_fails(&o, &["at its declared size", "of memory"]);
}

#[test]
fn non_finite_logits_are_an_error_not_a_class() {
    // Finite inputs whose logits overflow: predict printed `class AA`, confidence null, exit 0.
    let tmp = tempfile::tempdir().unwrap();
    let a = art("lejepa_fp32");
    let big = vec!["3e38"; 40].join(" ");
    let w = tmp.path().join("w.txt");
    std::fs::write(&w, &big).unwrap();
    for extra in [&[][..], &["--json"][..]] {
        let mut args = vec!["predict", "--artifact", s(&a), "--input", s(&w)];
        args.extend_from_slice(extra);
        assert_fails(&run(&args, ""), &["w.txt", "not finite"]);
    }
    // stream: the window that overflows is named; windows before it were printed.
    let good: Vec<String> = (0..10)
        .map(|t| format!("{} 0.1 -0.2 0.3", t as f32 * 0.1))
        .collect();
    let input = format!("{}\n{}\n", good.join("\n"), ["3e38"; 4].join(" "));
    let o = run(&["stream", "--artifact", s(&a)], &input);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("line 11") && err.contains("not finite"),
        "{err}"
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
    // eval reads raw readings through the artifact's preprocessing, which clips them, so a
    // CSV cannot overflow the fixtures; it goes through the same `classify_finite`.
}

#[test]
fn goldens_need_format_and_kind() {
    let a = art("lejepa_fp32");
    let g: Value =
        serde_json::from_str(&std::fs::read_to_string(a.join("golden.json")).unwrap()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut no_format = g.clone();
    no_format.as_object_mut().unwrap().remove("format");
    let mut no_kind = g.clone();
    no_kind["cases"][1].as_object_mut().unwrap().remove("kind");
    let mut bad_kind = g.clone();
    bad_kind["cases"][0]["kind"] = json!(7);
    for (file, v, needle) in [
        ("f.json", no_format, "field `format`: missing"),
        ("k.json", no_kind, "field `cases[1].kind`: missing"),
        (
            "b.json",
            bad_kind,
            "field `cases[0].kind`: must be a string",
        ),
    ] {
        let p = tmp.path().join(file);
        std::fs::write(&p, v.to_string()).unwrap();
        let o = run(&["check", "--artifact", s(&a), "--golden", s(&p)], "");
        assert_fails(&o, &[file, needle]);
    }
}
