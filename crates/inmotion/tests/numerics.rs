//! Pins the exact logits bits of every committed fixture artifact to
//! `inmotion::NUMERICS_VERSION`: a change to kernels, backend ops or model code that moves any
//! bit fails here, and an intended one bumps the version with new pins. Every exact (FMA)
//! tier gives the generic tier's bits (tests/artifacts.rs), so one table serves them all.
//! `KIN_PRINT_PINS=1` prints the current fingerprints instead of checking them.

use inmotion::golden::Golden;
use inmotion::Model;
use kin_infer_core::kernels::Tier;
use kin_infer_core::pins::{assert_pinned, fingerprint, Pin};
use std::path::PathBuf;

/// (numerics version, artifact, fingerprint of the logits of its golden windows in order),
/// taken with `KIN_PRINT_PINS=1`.
const PINS: &[Pin] = &[
    ("inmotion-numerics/2", "cf_jepa_fp32", 0xeef16ad3567b4f81),
    ("inmotion-numerics/2", "cf_jepa_int8", 0x4ae99714ebfd17c7),
    ("inmotion-numerics/2", "cf_jepa_q4", 0xafcefdf85483079f),
    ("inmotion-numerics/2", "lejepa_fp32", 0xc95d1e2c614ed041),
    ("inmotion-numerics/2", "lejepa_int8", 0x6c740426d7c565d3),
    ("inmotion-numerics/2", "lejepa_q4", 0x40eadf282b485557),
    ("inmotion-numerics/2", "sigreg_fp32", 0x32a99831de1fb627),
    ("inmotion-numerics/2", "sigreg_int8", 0x3893ec7b399f1252),
    ("inmotion-numerics/2", "sigreg_q4", 0x2e363c97d331db5a),
    ("inmotion-numerics/2", "t_jepa_fp32", 0x5cc0f2d905cf67cc),
    ("inmotion-numerics/2", "t_jepa_int8", 0x9b417c88023cafd0),
    ("inmotion-numerics/2", "t_jepa_q4", 0xc5fe90c477ff8b18),
    ("inmotion-numerics/2", "ts_jepa_fp32", 0xa996372f3e3b32d0),
    ("inmotion-numerics/2", "ts_jepa_int8", 0x8903b332ac1aec29),
    ("inmotion-numerics/2", "ts_jepa_q4", 0x63cad342f6fad388),
];

fn artifacts_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/inmotion")
}

#[test]
fn logits_bits_are_pinned_to_the_numerics_version() {
    let mut names: Vec<String> = std::fs::read_dir(artifacts_root())
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            (p.join("golden.json").is_file()).then(|| p.file_name()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    assert!(names.len() >= 15, "fixture artifacts missing: {names:?}");
    assert_pinned(inmotion::NUMERICS_VERSION, PINS, &names, |name| {
        let dir = artifacts_root().join(name);
        let mut m = Model::load_with(&dir, Tier::Generic).unwrap();
        let g = Golden::load(&dir, &m.meta).unwrap();
        let rows: Vec<Vec<f32>> = g
            .cases
            .iter()
            .map(|c| m.forward(&c.input).to_vec())
            .collect();
        fingerprint(rows.iter().map(Vec::as_slice))
    });
}
