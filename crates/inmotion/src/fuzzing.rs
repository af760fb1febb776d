//! Fuzzing entry points (not API). Each feeds arbitrary bytes through the real parser or
//! loader and ignores the result; none may panic or abort, whatever the input. The cargo-fuzz
//! targets in `fuzz/` and the stable replay test (`tests/fuzz_corpus.rs`) call these very
//! functions. The artifact loader reads a directory, so its bytes are written to a scratch
//! directory private to the process and thread (`kin_infer_core::fuzzing::scratch_dir`).

use crate::golden::Golden;
use crate::meta::Meta;
use crate::model::Model;
use kin_infer_core::fuzzing::{scratch_dir, split_first};
use serde_json::Value;
use std::path::Path;
use std::sync::OnceLock;

pub use kin_infer_core::fuzzing::cleanup;

/// Windows longer than this are not classified after a successful load.
const MAX_WINDOW: usize = 1 << 16;

/// The meta.json every `golden_inmotion` input is validated against (lejepa: seq_len 10,
/// in_channels 4, num_classes 4).
const GOLDEN_META: &str = include_str!("../../../tests/fixtures/inmotion/lejepa_fp32/meta.json");

fn json(data: &[u8]) -> Option<Value> {
    serde_json::from_str(std::str::from_utf8(data).ok()?).ok()
}

/// `meta.json`: parse and validate, as [`Meta::load`] does.
pub fn inmotion_meta(data: &[u8]) {
    if let Some(v) = json(data) {
        if let Ok(m) = Meta::from_value(&v, Path::new("meta.json")) {
            let _ = (m.family.name(), m.classes.map(|c| c.len()));
        }
    }
}

/// An inMotion golden file, validated against a fixed lejepa meta.json.
pub fn golden_inmotion(data: &[u8]) {
    static META: OnceLock<Option<Meta>> = OnceLock::new();
    let meta = META.get_or_init(|| {
        let v = serde_json::from_str(GOLDEN_META).ok()?;
        Meta::from_value(&v, Path::new("meta.json")).ok()
    });
    let (Some(meta), Some(v)) = (meta, json(data)) else {
        return;
    };
    if let Ok(g) = Golden::from_value(&v, Path::new("golden.json"), meta) {
        let _ = g.cases.iter().map(|c| c.input.len()).sum::<usize>();
    }
}

/// An artifact directory: `meta.json`, then (after the first NUL byte, which JSON text never
/// holds) `model.safetensors`; no NUL means no weights file. [`Model::load`], then one
/// classification of a zero window when the load succeeds.
pub fn inmotion_artifact(data: &[u8]) {
    let dir = scratch_dir("inmotion_artifact");
    let (meta, weights) = split_first(data);
    if std::fs::write(dir.join("meta.json"), meta).is_err() {
        return;
    }
    if let Some(w) = weights {
        if std::fs::write(dir.join("model.safetensors"), w).is_err() {
            return;
        }
    }
    if let Ok(mut m) = Model::load(&dir) {
        let n = m.meta.seq_len.checked_mul(m.meta.in_channels);
        if let Some(n) = n.filter(|&n| n <= MAX_WINDOW) {
            let _ = m.classify(&vec![0.0; n]);
        }
    }
}

/// A `predict --input` window file (`#` comment lines skipped).
pub fn window_line(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::input::window_values(text, "window");
    }
}

/// `stream` input, read line by line as the CLI reads it.
pub fn stream_line(data: &[u8]) {
    for line in std::io::BufRead::lines(data) {
        let Ok(line) = line else {
            break;
        };
        let _ = crate::input::stream_line(&line, "stream");
    }
}
