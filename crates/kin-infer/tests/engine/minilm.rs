//! The real model: all-MiniLM-L6-v2 against sentence-transformers embeddings
//! (tests/golden/minilm.json, made by python/gen_minilm_golden.py). Skips when the model is
//! absent; `.ci/run` fetches it.

use crate::common::{load, minilm_dir, repo_root};
use kin_infer::golden::{check, CaseKind, EmbeddingInput, GoldenFile};
use kin_infer::EmbedderOptions;

#[test]
fn minilm_matches_sentence_transformers() {
    let Some(dir) = minilm_dir("minilm_matches_sentence_transformers") else {
        return;
    };
    let golden = GoldenFile::load(&repo_root().join("tests/golden/minilm.json")).unwrap();
    assert!(golden.cases.len() >= 20);
    assert!(golden.tol <= 1e-5);
    let e = load(&dir, EmbedderOptions::default());
    let r = check(&e, &golden).unwrap();
    assert!(r.passed(), "max |diff| {}: {:?}", r.max_diff, r.mismatches);
    assert!(r.max_diff <= 1e-5);
    // Cosine similarity per case, computed independently of the tolerance check.
    for case in &golden.cases {
        let CaseKind::Embedding {
            input: EmbeddingInput::Text(t),
            expected,
        } = &case.kind
        else {
            panic!("MiniLM golden cases are text embeddings");
        };
        let v = &e.embed_texts(&[t.as_str()]).unwrap()[0];
        let dot: f64 = v.iter().zip(expected).map(|(a, b)| *a as f64 * b).sum();
        let na: f64 = v.iter().map(|a| (*a as f64).powi(2)).sum::<f64>().sqrt();
        let nb: f64 = expected.iter().map(|b| b * b).sum::<f64>().sqrt();
        let cos = dot / (na * nb);
        assert!(cos >= 0.999999, "case {}: cosine {cos}", case.name);
    }
}

#[test]
fn minilm_truncates_to_its_256_token_limit() {
    let Some(dir) = minilm_dir("minilm_truncates_to_its_256_token_limit") else {
        return;
    };
    let e = load(&dir, EmbedderOptions::default());
    assert_eq!(e.max_length(), 256);
    let long = "token ".repeat(1000);
    let enc = e.tokenize(&[long.as_str()]).unwrap();
    assert_eq!(enc[0].ids.len(), 256);
    assert_eq!(enc[0].ids[0], 101); // [CLS]
    assert_eq!(*enc[0].ids.last().unwrap(), 102); // [SEP] kept after truncation
    let short = load(
        &dir,
        EmbedderOptions {
            max_length: Some(16),
            ..Default::default()
        },
    );
    assert_eq!(short.tokenize(&[long.as_str()]).unwrap()[0].ids.len(), 16);
}
