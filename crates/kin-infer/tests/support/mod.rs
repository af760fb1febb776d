//! Scaffolding shared by the integration test binaries (`engine/`, `albert_t5.rs`,
//! `deberta.rs`, `nomic_jina.rs`): fixture paths, loading, pseudo-random token sequences,
//! the bit-for-bit determinism contract, golden checks and bad-config helpers.
//! Each binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use kin_infer::golden::{check, CheckReport, GoldenFile};
use kin_infer::kernels::Tier;
use kin_infer::{Embedder, EmbedderOptions, InferError};
use std::path::{Path, PathBuf};

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixtures_dir() -> PathBuf {
    repo_root().join("tests/fixtures")
}

pub fn fixture(name: &str) -> PathBuf {
    fixtures_dir().join(name)
}

pub fn load(dir: &Path, opts: EmbedderOptions) -> Embedder {
    Embedder::load(dir, &opts).unwrap_or_else(|e| panic!("load {}: {e}", dir.display()))
}

/// Loading `dir` with default options must fail; the error.
pub fn load_err(dir: &Path) -> InferError {
    match Embedder::load(dir, &EmbedderOptions::default()) {
        Ok(_) => panic!("{} loaded but should not", dir.display()),
        Err(e) => e,
    }
}

/// Options pinning the SIMD tier and the thread count.
pub fn opts(tier: Tier, threads: usize) -> EmbedderOptions {
    EmbedderOptions {
        tier: Some(tier),
        threads: Some(threads),
        ..Default::default()
    }
}

pub fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

/// Deterministic pseudo-random token sequences of the given lengths, ids in `first..vocab`
/// (an LCG seeded with `seed`).
pub fn random_ids(first: u32, vocab: usize, lengths: &[usize], seed: u64) -> Vec<Vec<u32>> {
    let span = vocab as u64 - first as u64;
    let mut s = seed;
    lengths
        .iter()
        .map(|&n| {
            (0..n)
                .map(|_| {
                    s = s
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    first + ((s >> 33) % span) as u32
                })
                .collect()
        })
        .collect()
}

/// Deterministic pseudo-random token sequences of varied lengths, CLS-first/SEP-last free.
pub fn random_sequences(vocab: usize, lengths: &[usize], seed: u64) -> Vec<Vec<u32>> {
    random_ids(0, vocab, lengths, seed)
}

/// `n` varied lengths from 1 up to `max_len`, longer and shorter ones interleaved.
pub fn varied_lengths(n: usize, max_len: usize) -> Vec<usize> {
    (0..n).map(|i| 1 + (i * 37 + 11) % max_len).collect()
}

/// `n` pseudo-random sequences of ids `>= 4` (past the special tokens), of varied lengths up
/// to `max_len`.
pub fn ids_past_specials(vocab: usize, max_len: usize, n: usize, seed: u64) -> Vec<Vec<u32>> {
    random_ids(4, vocab, &varied_lengths(n, max_len), seed)
}

/// [`ids_past_specials`] sized for the model of `e` (its vocabulary and length limit).
pub fn model_ids_past_specials(e: &Embedder, n: usize, seed: u64) -> Vec<Vec<u32>> {
    let c = e.config();
    ids_past_specials(c.vocab_size, c.max_sequence_length(), n, seed)
}

/// Embeds all of `seqs` in one batch.
pub fn embed_ids(e: &Embedder, seqs: &[Vec<u32>]) -> Vec<Vec<f32>> {
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    e.embed_tokens(&refs, None).unwrap()
}

/// Embeds `seqs` in consecutive batches of `batch`.
pub fn embed_in_batches(e: &Embedder, seqs: &[Vec<u32>], batch: usize) -> Vec<Vec<f32>> {
    seqs.chunks(batch).flat_map(|c| embed_ids(e, c)).collect()
}

/// The determinism contract on each fixture of `names`, bit for bit: each sequence embedded
/// alone (generic tier, 1 thread) is the reference; batches of each size in `batches`,
/// reversed batches of 3 (other neighbours around every sequence), and batches of 32 on every
/// available tier with 1 and 2 threads must all reproduce it. `make_seqs` picks the sequences
/// for the model.
pub fn assert_deterministic(
    names: &[&str],
    batches: &[usize],
    make_seqs: impl Fn(&Embedder) -> Vec<Vec<u32>>,
) {
    for &name in names {
        assert_deterministic_one(name, &fixture(name), batches, &make_seqs);
    }
}

/// [`assert_deterministic`] with batches of 3 and 32 and 40 sequences of
/// [`model_ids_past_specials`].
pub fn assert_fixtures_deterministic(names: &[&str]) {
    assert_deterministic(names, &[3, 32], |e| model_ids_past_specials(e, 40, 11));
}

fn assert_deterministic_one(
    name: &str,
    dir: &Path,
    batches: &[usize],
    make_seqs: &impl Fn(&Embedder) -> Vec<Vec<u32>>,
) {
    let base = load(dir, opts(Tier::Generic, 1));
    let seqs = make_seqs(&base);
    let reference = bits(&embed_in_batches(&base, &seqs, 1));
    for &batch in batches {
        assert_eq!(
            bits(&embed_in_batches(&base, &seqs, batch)),
            reference,
            "{name}: batch {batch}"
        );
    }
    // Reversed order puts different neighbours around every sequence.
    let mut rev = seqs.clone();
    rev.reverse();
    let mut out = embed_in_batches(&base, &rev, 3);
    out.reverse();
    assert_eq!(bits(&out), reference, "{name}: reversed batches of 3");
    for tier in Tier::available_exact() {
        for threads in [1, 2] {
            let e = load(dir, opts(tier, threads));
            assert_eq!(
                bits(&embed_in_batches(&e, &seqs, 32)),
                reference,
                "{name}: tier {} with {threads} threads",
                tier.name()
            );
        }
    }
}

/// Hidden states of `seqs` run together equal each one run alone, bit for bit.
pub fn assert_hidden_states_alone_match_together(name: &str, e: &Embedder, seqs: &[Vec<u32>]) {
    let refs: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
    let together = e.hidden_states(&refs, None).unwrap();
    for (i, s) in refs.iter().enumerate() {
        let alone = e.hidden_states(&[s], None).unwrap();
        assert_eq!(
            bits(&alone),
            bits(std::slice::from_ref(&together[i])),
            "{name}: sequence {i} (len {})",
            s.len()
        );
    }
}

/// [`assert_hidden_states_alone_match_together`] on each fixture of `names`, with 12
/// sequences of [`model_ids_past_specials`].
pub fn assert_fixture_hidden_states_ignore_neighbours(names: &[&str]) {
    for &name in names {
        let e = load(&fixture(name), EmbedderOptions::default());
        assert_hidden_states_alone_match_together(name, &e, &model_ids_past_specials(&e, 12, 5));
    }
}

/// [`assert_matches_golden`] on each fixture of `names`; their reports.
pub fn assert_fixtures_match_goldens(names: &[&str]) -> Vec<CheckReport> {
    names
        .iter()
        .map(|&name| assert_matches_golden(&fixture(name), name))
        .collect()
}

/// Checks the fixture at `dir` against its `golden.json`: something compared, all within
/// tolerance. The report, for further checks.
pub fn assert_matches_golden(dir: &Path, label: &str) -> CheckReport {
    let golden = GoldenFile::load(&dir.join("golden.json")).unwrap();
    let e = load(dir, EmbedderOptions::default());
    let r = check(&e, &golden).unwrap();
    assert!(r.compared > 0, "{label}: nothing compared");
    assert!(
        r.passed(),
        "{label}: max |diff| {} > tol {}: {:?}",
        r.max_diff,
        r.tol,
        r.mismatches
    );
    r
}

/// An edit of a JSON config, for the bad-config tables.
pub type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;

/// An [`Edit`] setting `field` to `value`.
pub fn set(field: &'static str, value: impl Into<serde_json::Value>) -> Edit {
    let value = value.into();
    Box::new(move |c| c[field] = value)
}

/// An [`Edit`] removing `field`.
pub fn remove_field(field: &'static str) -> Edit {
    Box::new(move |c| {
        c.as_object_mut().unwrap().remove(field);
    })
}

/// A copy of a fixture (its weights, modules.json, sentence_bert_config.json and pooling
/// config) whose config.json is edited by `edit`.
pub fn edited(name: &str, edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let src = fixture(name);
    let dir = tempfile::tempdir().unwrap();
    for f in [
        "model.safetensors",
        "modules.json",
        "sentence_bert_config.json",
    ] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    std::fs::create_dir(dir.path().join("1_Pooling")).unwrap();
    std::fs::copy(
        src.join("1_Pooling/config.json"),
        dir.path().join("1_Pooling/config.json"),
    )
    .unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(src.join("config.json")).unwrap()).unwrap();
    edit(&mut cfg);
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    dir
}

/// A copy of a fixture (files and module directories) in a temp dir.
pub fn copy_fixture(name: &str) -> tempfile::TempDir {
    fn copy(src: &Path, dst: &Path) {
        std::fs::create_dir_all(dst).unwrap();
        for e in std::fs::read_dir(src).unwrap() {
            let e = e.unwrap();
            let to = dst.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to);
            } else {
                std::fs::copy(e.path(), to).unwrap();
            }
        }
    }
    let d = tempfile::tempdir().unwrap();
    copy(&fixture(name), d.path());
    d
}

/// Sets (or with `None` removes) `field` in the JSON file `rel` of a fixture copy.
pub fn edit_json(dir: &Path, rel: &str, field: &str, value: Option<serde_json::Value>) {
    let p = dir.join(rel);
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    match value {
        Some(x) => v[field] = x,
        None => {
            v.as_object_mut().unwrap().remove(field);
        }
    }
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// Loading `dir` must fail with a `Config` error naming exactly `field`; the path it names.
pub fn config_error_path(dir: &Path, field: &str, label: &str) -> PathBuf {
    let err = load_err(dir);
    match &err {
        InferError::Config { field: f, path, .. } => {
            assert_eq!(f, field, "{label}: wrong field named: {err}");
            path.clone()
        }
        other => panic!("{label}: expected a Config error, got {other}"),
    }
}
pub mod decoder;
