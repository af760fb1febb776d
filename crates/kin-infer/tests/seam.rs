//! The compute seam holds: no model family, shared block or pipeline reaches the CPU kernels
//! around the backend (`src/backend/`). A family that called a CPU kernel "just for this one
//! norm" would pin itself to the CPU and silently break every GPU backend, so this scans the
//! sources rather than trusting review.

use std::fs;
use std::path::{Path, PathBuf};

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The source without `//` comments (doc comments may name the kernels they replaced).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn nothing_outside_the_backend_reaches_the_cpu_kernels() {
    // The engine's sources and the core's (kernels, backend and the shared blocks live in
    // kin-infer-core since the split; the rules are the same for both).
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let roots = [manifest.join("src"), manifest.join("../kin-infer-core/src")];
    let mut files = Vec::new();
    for src in &roots {
        sources(src, &mut files);
    }
    assert!(files.len() > 60, "found only {} sources", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let src = roots.iter().find(|r| f.starts_with(r)).unwrap();
        let rel = f
            .strip_prefix(src)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        if rel.starts_with("backend/") || rel.starts_with("kernels/") {
            continue;
        }
        let text = code(&fs::read_to_string(f).unwrap());
        // Anywhere: the dispatch table and the ways to get one.
        let mut banned = vec![
            "host_kernels",
            "Kernels",
            "kernels::kernels",
            "kernels::for_tier",
        ];
        // Model families and shared blocks: nothing from `kernels` at all (not even its math:
        // a backend computes every activation).
        if rel.starts_with("models/") || rel.starts_with("nn/") {
            banned.push("kernels");
        }
        for b in banned {
            if text.contains(b) {
                bad.push(format!("{}/{rel} uses `{b}`", src.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "code outside src/backend/ reaches the CPU kernels (route it through a \
         backend op):\n{}",
        bad.join("\n")
    );
}

/// inMotion's models run on the same seam: nothing in its sources names the kernel table
/// (only `Tier`, to pick one), so there is no second compute stack to keep in step.
#[test]
fn inmotion_runs_on_the_backend_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../inmotion/src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    assert!(files.len() > 10, "found only {} sources", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = code(&fs::read_to_string(f).unwrap());
        for b in [
            "Kernels",
            "kernels::for_tier",
            "kernels::kernels",
            "PackedMatrix",
        ] {
            if text.contains(b) {
                bad.push(format!("{} uses `{b}`", f.display()));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "inMotion bypasses the backend:\n{}",
        bad.join("\n")
    );
}

#[test]
fn the_scan_catches_a_bypass() {
    // The comment stripper keeps code and drops comments, so the scan above sees calls.
    let t = code("let k = be.host_kernels(); // host_kernels in a comment\n// Kernels");
    assert!(t.contains("host_kernels"));
    assert!(!t.contains("Kernels"));
}
