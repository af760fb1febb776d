//! Resident memory of loaded inMotion artifacts: fp32 against int8 and q4, with the quantized
//! weights kept as codes (the default) and dequantized to f32 at load (what the runtime did
//! before codes stayed packed).
//!
//! ```sh
//! cargo run --release -p inmotion --example resident -- [COPIES] [ARTIFACT_DIR...]
//! ```
//!
//! Each measurement runs in a fresh child process (a freed heap is not handed back to the
//! system, so one process cannot measure twice): it loads `COPIES` (default 200) models of the
//! artifact and reports the growth of its resident set (`VmRSS`, /proc/self/status) divided by
//! the copies, so page granularity and the allocator's slack average out. Default artifacts:
//! the 15 trained fixtures under tests/fixtures/inmotion. Linux only (reads /proc).

use inmotion::Model;
use kin_infer_core::backend::CpuCompute;
use std::path::{Path, PathBuf};
use std::process::Command;

fn rss_kb() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

/// Child: `--one DIR COPIES KEEP` prints `bytes_per_copy matrices_as_codes codes_bytes`.
fn one(dir: &Path, copies: usize, keep: bool) {
    let load = || {
        let be = Box::new(CpuCompute::new().expect("a CPU backend"));
        Model::load_on_with(dir, be, keep).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    };
    // One load first: the code, the thread pool and the allocator's arenas are then resident
    // before the baseline.
    let first = load();
    let before = rss_kb();
    let models: Vec<Model> = (0..copies).map(|_| load()).collect();
    let after = rss_kb();
    println!(
        "{} {} {}",
        (after.saturating_sub(before)) * 1024 / copies,
        first.codes_in_memory.0,
        first.codes_in_memory.1
    );
    drop(models);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        let keep = args[3] == "1";
        return one(Path::new(&args[1]), args[2].parse().expect("copies"), keep);
    }
    let copies: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(200);
    let mut dirs: Vec<PathBuf> = args
        .iter()
        .skip(usize::from(
            args.first().is_some_and(|a| a.parse::<usize>().is_ok()),
        ))
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion");
        for fam in ["lejepa", "t_jepa", "ts_jepa", "cf_jepa", "sigreg"] {
            for f in ["fp32", "int8", "q4"] {
                dirs.push(root.join(format!("{fam}_{f}")));
            }
        }
    }
    let me = std::env::current_exe().expect("own path");
    let run = |dir: &Path, keep: bool| -> Vec<usize> {
        let out = Command::new(&me)
            .args(["--one", &dir.display().to_string(), &copies.to_string()])
            .arg(if keep { "1" } else { "0" })
            .output()
            .expect("child");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(|x| x.parse().expect("a number"))
            .collect()
    };
    println!(
        "{copies} copies per measurement, resident bytes per loaded model (VmRSS growth / copies)"
    );
    println!("| artifact | model.safetensors | matrices as codes (panel bytes) | resident, codes kept | resident, f32 at load |");
    println!("|---|---|---|---|---|");
    for d in &dirs {
        let file = std::fs::metadata(d.join("model.safetensors")).map_or(0, |m| m.len());
        let kept = run(d, true);
        let f32s = run(d, false);
        println!(
            "| {} | {file} | {} ({}) | {} | {} |",
            d.file_name().unwrap().to_string_lossy(),
            kept[1],
            kept[2],
            kept[0],
            f32s[0]
        );
    }
}
