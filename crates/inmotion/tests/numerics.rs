//! Pins the exact logits bits of every committed fixture artifact to
//! `inmotion::NUMERICS_VERSION`: a change to kernels, backend ops or model code that moves any
//! bit fails here, and an intended one bumps the version with new pins. Every exact (FMA)
//! tier gives the generic tier's bits (tests/artifacts.rs), so one table serves them all.
//! `KIN_PRINT_PINS=1` prints the current fingerprints instead of checking them.

use inmotion::golden::Golden;
use inmotion::Model;
use kin_infer_core::kernels::Tier;
use std::path::PathBuf;

/// FNV-1a over the bit patterns.
fn fingerprint<'a>(vs: impl IntoIterator<Item = &'a [f32]>) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for v in vs {
        for x in v {
            for b in x.to_bits().to_le_bytes() {
                h ^= b as u64;
                h = h.wrapping_mul(0x100000001b3);
            }
        }
    }
    h
}

/// (numerics version, artifact, fingerprint of the logits of its golden windows in order),
/// taken with `KIN_PRINT_PINS=1`.
const PINS: &[(&str, &str, u64)] = &[
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
    let print = std::env::var_os("KIN_PRINT_PINS").is_some();
    let mut failures = Vec::new();
    for name in &names {
        let dir = artifacts_root().join(name);
        let mut m = Model::load_with(&dir, Tier::Generic).unwrap();
        let g = Golden::load(&dir, &m.meta).unwrap();
        let rows: Vec<Vec<f32>> = g
            .cases
            .iter()
            .map(|c| m.forward(&c.input).to_vec())
            .collect();
        let fp = fingerprint(rows.iter().map(Vec::as_slice));
        if print {
            println!(
                "    (\"{}\", \"{name}\", {fp:#x}),",
                inmotion::NUMERICS_VERSION
            );
            continue;
        }
        match PINS
            .iter()
            .find(|(v, n, _)| *v == inmotion::NUMERICS_VERSION && n == name)
        {
            Some((_, _, want)) if *want == fp => {}
            Some((_, _, want)) => failures.push(format!("{name}: {fp:#x}, pinned {want:#x}")),
            None => failures.push(format!("{name}: no pin for {}", inmotion::NUMERICS_VERSION)),
        }
    }
    assert!(
        failures.is_empty(),
        "output bits moved without a numerics version bump:\n{}",
        failures.join("\n")
    );
}
