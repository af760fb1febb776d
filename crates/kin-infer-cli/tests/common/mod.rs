//! Helpers shared by the CLI test binaries.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/fixtures").join(name)
}

pub fn minilm() -> Option<PathBuf> {
    let d = std::env::var_os("KIN_MINILM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/all-MiniLM-L6-v2"));
    if d.join("model.safetensors").is_file() {
        Some(d)
    } else {
        // CI sets KIN_REQUIRE_MINILM=1: these are the only tests of a real tokenizer.json, so
        // a fetch that silently did not happen must fail them, not skip them.
        assert!(
            std::env::var("KIN_REQUIRE_MINILM").map_or(true, |v| v != "1"),
            "KIN_REQUIRE_MINILM=1 but all-MiniLM-L6-v2 is not at {} (scripts/fetch-minilm.sh)",
            d.display()
        );
        eprintln!(
            "SKIPPED: all-MiniLM-L6-v2 not found at {} (scripts/fetch-minilm.sh)",
            d.display()
        );
        None
    }
}

pub fn kin(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kin-infer"));
    c.args(args)
        .env_remove("KIN_INFER_SIMD")
        .env_remove("KIN_INFER_THREADS")
        .env_remove("KIN_INFER_BACKEND")
        .env_remove("KIN_INFER_FORCE_CPU")
        .env_remove("KIN_INFER_CPU_BACKEND");
    c
}

/// `kin-infer <cmd> --model <model> <args>`.
pub fn kin_on(cmd: &str, model: &Path, args: &[&str]) -> Command {
    let mut c = kin(&[cmd, "--model", model.to_str().unwrap()]);
    c.args(args);
    c
}

pub fn run(c: &mut Command, stdin: &str) -> Output {
    let mut child = c
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    // The child may exit (bad model) before reading its input: a broken pipe is expected then.
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    child.wait_with_output().unwrap()
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

pub fn assert_clean_error(o: &Output, code: i32, needle: &str) {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    assert!(err.contains(needle), "stderr lacks `{needle}`: {err}");
}

/// `kin-infer check --model MODEL --golden GOLDEN [extra...]`, run with no input.
pub fn check(model: &Path, golden: &Path, extra: &[&str]) -> Output {
    let (m, g) = (model.to_str().unwrap(), golden.to_str().unwrap());
    run(
        &mut kin(&[&["check", "--model", m, "--golden", g], extra].concat()),
        "",
    )
}

/// Runs `sh -c script`, whose stdout is the pid of a process it leaves running in the
/// background, and collects that orphan's exit status: this process becomes the subreaper of
/// its descendants, and the shell starts with SIGHUP at its default (the test runner may
/// itself run under nohup, and a run under nohup is detached on purpose). Returns the exit
/// code and whether the orphan outlived the shell (a run that ends before its parent proves
/// nothing about what happens when the parent dies). Past `limit` the orphan is killed and
/// the test fails.
pub fn orphan_exit(script: &str, limit: std::time::Duration) -> (i32, bool) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl with these arguments only changes this process's reaping role.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut sh = Command::new("sh");
    sh.arg("-c").arg(script);
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        sh.pre_exec(|| {
            libc::signal(libc::SIGHUP, libc::SIG_DFL);
            Ok(())
        });
    }
    let o = sh.output().unwrap();
    let pid: i32 = text(&o.stdout).trim().parse().unwrap();
    let t0 = std::time::Instant::now();
    let mut status = 0;
    // SAFETY: plain waitpid on a pid that is (now) our child.
    let outlived = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == 0;
    // SAFETY (loop): plain waitpid on a pid that is (now) our child.
    while outlived && unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
        if t0.elapsed() > limit {
            // SAFETY: ending our own (adopted) child.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the orphan did not exit within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(libc::WIFEXITED(status), "killed by a signal: {status}");
    (libc::WEXITSTATUS(status), outlived)
}

/// `kin-infer ARGS` with no input, which must succeed (its stderr is the failure message).
pub fn ok(args: &[&str]) -> Output {
    let o = run(&mut kin(args), "");
    assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o.stderr));
    o
}
