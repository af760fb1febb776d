//! Feedback on long work (issue 35): no bar when stderr is not a terminal (a log or a test
//! capture), a bar on a terminal (through `script`, where present), the end summary as a line
//! and as the JSON `done` record, honest wording when a run that persists nothing is stopped,
//! and the watchdog's orphan check honouring nohup / setsid. Fixtures only.

mod common;

use common::*;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn tiny() -> String {
    root()
        .join("tests/server_fixtures/embed_tiny")
        .display()
        .to_string()
}

/// `n` lines of code-like text.
fn lines(dir: &Path, n: usize) -> PathBuf {
    let p = dir.join(format!("in{n}.txt"));
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!(
            "fn f{i}(x: u32) -> u32 {{ x + {i} }} // buffer map value\n"
        ));
    }
    std::fs::write(&p, s).unwrap();
    p
}

/// What a terminal would show: no carriage-return redraws, no bar, no ETA.
fn assert_no_bar(err: &str) {
    assert!(
        !err.contains('\r') && !err.contains("ETA") && !err.contains("[#"),
        "a bar on a non-terminal stderr: {err:?}"
    );
}

#[test]
fn a_plain_run_prints_no_bar_and_one_summary_line() {
    let tmp = tempfile::tempdir().unwrap();
    let input = lines(tmp.path(), 50);
    let out = tmp.path().join("o.jsonl");
    let (i, o) = (input.to_str().unwrap(), out.to_str().unwrap());
    let m = tiny();
    let r = run(
        &mut kin(&["embed", "--model", &m, "--input", i, "--output", o]),
        "",
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let err = text(&r.stderr);
    assert_no_bar(&err);
    let summary: Vec<&str> = err.lines().filter(|l| l.starts_with("embedded ")).collect();
    assert_eq!(summary.len(), 1, "{err}");
    assert!(
        summary[0].starts_with("embedded 50 items in ")
            && summary[0].contains(" s (")
            && summary[0].contains("items/s")
            && summary[0].ends_with(&format!("-> {o}")),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap().lines().count(), 50);

    // To stdout: the summary names it, and stdout holds records only.
    let r = run(&mut kin(&["embed", "--model", &m, "--input", i]), "");
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    assert!(text(&r.stderr).contains("-> stdout"), "{}", text(&r.stderr));
    assert_eq!(text(&r.stdout).lines().count(), 50);

    // A resumed durable run that has nothing left counts the resumed items.
    let d = tmp.path().join("d.jsonl");
    let args = [
        "embed",
        "--model",
        &m,
        "--input",
        i,
        "--output",
        d.to_str().unwrap(),
        "--resume",
    ];
    assert_eq!(run(&mut kin(&args), "").status.code(), Some(0));
    let r = run(&mut kin(&args), "");
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let err = text(&r.stderr);
    assert_no_bar(&err);
    assert!(
        err.contains("embedded 50 items (0 this run, 50 resumed)"),
        "{err}"
    );
}

#[test]
fn progress_json_keeps_records_only_and_the_done_record_has_the_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let input = lines(tmp.path(), 30);
    let out = tmp.path().join("o.jsonl");
    let m = tiny();
    let r = run(
        &mut kin(&[
            "embed",
            "--model",
            &m,
            "--input",
            input.to_str().unwrap(),
            "--output",
            out.to_str().unwrap(),
            "--progress-json",
        ]),
        "",
    );
    assert_eq!(r.status.code(), Some(0), "{}", text(&r.stderr));
    let err = text(&r.stderr);
    let records: Vec<serde_json::Value> = err
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let done = records.iter().find(|v| v["event"] == "done").expect("done");
    assert_eq!(done["items"], 30);
    assert_eq!(done["persisted"], 30);
    assert_eq!(done["total"], 30);
    assert_eq!(done["items_this_run"], 30);
    assert_eq!(done["output"], out.display().to_string());
    assert!(done["seconds"].as_f64().unwrap() > 0.0, "{done}");
    assert!(done["items_per_s"].as_f64().unwrap() > 0.0, "{done}");
    assert!(done["rate_per_s"].is_number() && done["peak_rss_bytes"].is_number());
    assert!(records.iter().any(|v| v["event"] == "progress"));
}

#[test]
fn a_stopped_run_that_persists_nothing_never_says_persisted() {
    let tmp = tempfile::tempdir().unwrap();
    let input = lines(tmp.path(), 200_000);
    let i = input.to_str().unwrap();
    let m = tiny();
    let out = tmp.path().join("o.jsonl");
    let o = out.to_str().unwrap();
    let cap = ["--max-wall", "0.5"];

    let mut a = vec!["embed", "--model", &m, "--input", i, "--output", o];
    a.extend(cap);
    let r = run(&mut kin(&a), "");
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(
        err.contains("nothing persisted") && err.contains("--resume"),
        "{err}"
    );
    assert!(!err.contains("items persisted"), "{err}");
    assert!(!out.exists(), "a stopped plain run leaves no output file");

    let mut a = vec!["embed", "--model", &m, "--input", i];
    a.extend(cap);
    let r = run(&mut kin(&a), "");
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(
        err.contains("written to stdout, nothing persisted") && err.contains("--resume"),
        "{err}"
    );

    // A durable run does persist, and says where and how to continue.
    let mut a = vec![
        "embed", "--model", &m, "--input", i, "--output", o, "--resume",
    ];
    a.extend(cap);
    let r = run(&mut kin(&a), "");
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!("items persisted in {o}")) && err.contains("rerun"),
        "{err}"
    );
}

#[test]
fn quantize_prints_no_bar_off_a_terminal_and_a_summary_with_seconds() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("q.gguf");
    let model = root().join("tests/decoder_fixtures/llama_gqa");
    let r = run(
        &mut kin_on(
            "quantize",
            &model,
            &["--type", "q8_0", "--out", out.to_str().unwrap()],
        ),
        "",
    );
    let err = text(&r.stderr);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert_no_bar(&err);
    assert!(
        err.contains(" bytes) in ") && err.contains(" s: ") && err.contains(" tensors"),
        "{err}"
    );
}

/// Runs `cmd` under `script` (a pseudo-terminal), returning what the terminal received, or
/// `None` where util-linux's `script` is absent.
fn on_a_terminal(cmd: &str) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("SKIPPED: no `script` (util-linux) to give the run a terminal");
        return None;
    }
    let o = Command::new("script")
        .args(["-qec", cmd, "/dev/null"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stdout));
    Some(text(&o.stdout))
}

#[test]
fn a_terminal_gets_a_bar_with_rate_and_eta() {
    let tmp = tempfile::tempdir().unwrap();
    let input = lines(tmp.path(), 3000);
    let out = tmp.path().join("o.jsonl");
    let cmd = format!(
        "'{}' embed --model '{}' --input '{}' --output '{}' --batch-size 8",
        env!("CARGO_BIN_EXE_kin-infer"),
        tiny(),
        input.display(),
        out.display()
    );
    let Some(term) = on_a_terminal(&cmd) else {
        return;
    };
    assert!(
        term.contains("items/s") && term.contains("ETA") && term.contains("/3000 items"),
        "{term:?}"
    );
    assert!(term.contains("embedded 3000 items in "), "{term:?}");
}

/// Starts `kin-infer embed` in the background of a shell that exits at once, `prefix`
/// (`nohup`, `setsid`, or nothing) in front, with SIGHUP at its default (the test runner may
/// itself run under nohup); collects the orphan's exit status as its subreaper.
fn orphaned_run(prefix: &str, n: usize) -> (i32, String, usize, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let input = lines(tmp.path(), n);
    let out = tmp.path().join("o.jsonl");
    let err = tmp.path().join("err.txt");
    let script = format!(
        "{prefix} '{}' embed --model '{}' --input '{}' --output '{}' < /dev/null > /dev/null 2> '{}' & echo $!; sleep 0.3",
        env!("CARGO_BIN_EXE_kin-infer"),
        tiny(),
        input.display(),
        out.display(),
        err.display()
    );
    let (code, outlived) = orphan_exit(&script, Duration::from_secs(120));
    let done = std::fs::read_to_string(&out).map_or(0, |s| s.lines().count());
    (
        code,
        std::fs::read_to_string(&err).unwrap_or_default(),
        done,
        outlived,
    )
}

#[test]
fn an_orphaned_run_exits_3() {
    let (code, err, _, outlived) = orphaned_run("", 200_000);
    assert!(outlived, "the run ended before its parent: {err}");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("orphaned"), "{err}");
}

/// A run started under `tool` (nohup or setsid) outlives its parent, says its orphan check is
/// off, and completes.
fn detached_run_completes(tool: &str) {
    let (code, err, done, outlived) = orphaned_run(tool, 60_000);
    assert!(
        outlived,
        "the run ended before its parent, proving nothing: {err}"
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(done, 60_000, "{err}");
    assert!(err.contains("embedded 60000 items"), "{err}");
    assert!(
        err.contains(&format!("orphan check off (started under {tool}")),
        "{err}"
    );
}

#[test]
fn a_run_started_under_nohup_outlives_its_parent_and_completes() {
    detached_run_completes("nohup");
}

#[test]
fn a_run_started_under_setsid_outlives_its_parent_and_completes() {
    detached_run_completes("setsid");
}

#[test]
fn plan_says_whether_the_orphan_check_is_on() {
    let m = tiny();
    // SIGHUP at its default (whatever the runner has), then under nohup: on, then off.
    for (ignore_hup, want) in [(false, ": on ("), (true, ": off (started under nohup")] {
        let mut c = kin(&["plan", "--model", &m]);
        // SAFETY: only async-signal-safe calls between fork and exec.
        unsafe {
            c.pre_exec(move || {
                let disposition = if ignore_hup {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                };
                libc::signal(libc::SIGHUP, disposition);
                Ok(())
            });
        }
        let o = run(&mut c, "");
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        let row = out
            .lines()
            .find(|l| l.starts_with("embed_orphan_check"))
            .unwrap_or_else(|| panic!("no orphan-check row: {out}"));
        assert!(row.contains(want), "SIGHUP ignored: {ignore_hup}: {row}");
    }
}
