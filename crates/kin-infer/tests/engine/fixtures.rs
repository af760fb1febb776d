//! Parity with the PyTorch goldens of every tiny fixture (tests/fixtures, made by
//! python/gen_fixtures.py).

use crate::common::{all_fixtures, load};
use crate::support::assert_matches_golden;
use kin_infer::golden::{check, GoldenFile};
use kin_infer::EmbedderOptions;

#[test]
fn every_fixture_matches_its_golden() {
    let fixtures = all_fixtures();
    assert!(
        fixtures.len() >= 6,
        "expected at least 6 fixtures, found {fixtures:?}"
    );
    for dir in fixtures {
        assert_matches_golden(&dir, &dir.display().to_string());
    }
}

#[test]
fn a_perturbed_golden_fails() {
    let dir = crate::common::fixture("bert_tiny");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("golden.json")).unwrap()).unwrap();
    let case = v["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["kind"] == "hidden")
        .unwrap();
    let x = case["expected"][0][0][0].as_f64().unwrap();
    case["expected"][0][0][0] = serde_json::json!(x + 0.01);
    let g = GoldenFile::from_value(&v, &dir.join("golden.json")).unwrap();
    let e = load(&dir, EmbedderOptions::default());
    let r = check(&e, &g).unwrap();
    assert!(!r.passed());
    assert_eq!(r.mismatches[0].position, "sequence 0, token 0, dim 0");
}

#[test]
fn malformed_goldens_are_errors_not_passes() {
    let path = std::path::Path::new("g.json");
    for (bad, why) in [
        (
            r#"{"format":"kin-infer-golden/1","cases":[{"kind":"embedding","input_ids":[1],"expected":[0.0]}]}"#,
            "tol",
        ),
        (
            r#"{"format":"kin-infer-golden/1","tol":1e-4,"cases":[]}"#,
            "empty",
        ),
        (
            r#"{"format":"kin-infer-golden/1","tol":1e-4,"cases":[{"kind":"frobnicate"}]}"#,
            "unknown kind",
        ),
        (
            r#"{"tol":1e-4,"cases":[{"kind":"embedding","input_ids":[1],"expected":[0.0]}]}"#,
            "format",
        ),
        (
            r#"{"format":"kin-infer-golden/1","tol":1e-4,"cases":[{"kind":"hidden","input_ids":[[1,2]],"expected":[[[0.0]]]}]}"#,
            "rows",
        ),
    ] {
        let v: serde_json::Value = serde_json::from_str(bad).unwrap();
        let err = GoldenFile::from_value(&v, path).unwrap_err().to_string();
        assert!(
            err.contains(why),
            "{bad}: error `{err}` does not mention `{why}`"
        );
    }
}
