//! Fuzzing entry points (not API). Each feeds arbitrary bytes through the real parser or
//! loader and ignores the result; none may panic or abort, whatever the input. The cargo-fuzz
//! targets in `fuzz/` and the stable replay test (`tests/fuzz_corpus.rs`) call these very
//! functions. Parsers that only read a directory get the bytes written to a scratch directory
//! private to the process and thread ([`scratch_dir`]).

use crate::gpu::CpuCompute;
use crate::io::config::{BertConfig, ModelArchitecture};
use crate::io::golden::GoldenFile;
use crate::io::input_line::parse_line;
use crate::io::safetensors::{WeightStore, Weights};
use crate::io::st_config::SentenceConfig;
use crate::models::{decoders, load_encoder};
use std::path::Path;

pub use kin_infer_core::fuzzing::{
    cleanup, frames, replay_corpus, scratch_dir, split_first, SEPARATOR,
};

/// Shards written at most by [`shard_index`].
const MAX_SHARDS: usize = 8;

/// A valid safetensors file holding no tensor.
pub const EMPTY_SAFETENSORS: &[u8] = b"\x02\x00\x00\x00\x00\x00\x00\x00{}";

/// Reads everything a loaded store offers, every tensor in both read paths.
fn exercise_store(store: &WeightStore) {
    let _ = (
        store.len(),
        store.is_empty(),
        store.dtype_counts(),
        store.parameter_count(),
        store.storage_dtype(),
        store.shard_paths(),
    );
    let names: Vec<String> = store.names().into_iter().map(String::from).collect();
    for name in &names {
        let shape = store.shape(name).unwrap_or(&[]).to_vec();
        let _ = store.read(name, &shape).map(|t| t.len());
        let _ = store.read_matrix(name, &shape).map(|m| m.to_f32().len());
        // A wrong shape must be an error, not a read.
        let mut wrong = shape.clone();
        wrong.push(1);
        let _ = store.read(name, &wrong);
    }
    if let Some(first) = names.first() {
        if let Ok(w) = Weights::with_prefixes(store, &["", "bert."], first) {
            let _ = w.get(first, store.shape(first).unwrap_or(&[]));
        }
    }
}

/// A GGUF file: header, metadata and tensor directory validation, then every tensor's bytes
/// dequantized by the scalar references (bounded: the file's own size bounds every tensor).
pub fn gguf_file(data: &[u8]) {
    if let Ok(f) = crate::io::gguf::GgufFile::from_bytes("fuzz.gguf", data.to_vec()) {
        for t in &f.tensors {
            let v = f.dequantize(t);
            assert_eq!(v.len(), t.len());
        }
        let _ = f.get("general.architecture").and_then(|v| v.as_str());
        // The tokenizer built from its metadata and run on a text (a vocabulary that builds
        // can still fail when used), and the chat template's tokens.
        if let Ok(t) = crate::io::gguf_tokenizer::load(&f) {
            let _ = t
                .encode("Hello, wörld! aaaa <s> 12345", true)
                .map(|e| e.len());
        }
        let _ = crate::io::gguf_tokenizer::token_text(&f, "tokenizer.ggml.eos_token_id");
    }
    // The whole decoder loader over the file (config from metadata, tensors, layout).
    let path = scratch_dir("gguf_file").join("model.gguf");
    let Ok(be) = CpuCompute::new() else {
        return;
    };
    if std::fs::write(&path, data).is_ok() {
        let _ = decoders::load_decoder(&path, &be).map(|m| m.spec().kv_dim());
        // And the encoder loader (BERT GGUFs): config, tensors, pooling, tokenizer.
        let opts = crate::embed::EmbedderOptions {
            threads: Some(1),
            ..Default::default()
        };
        let _ = crate::embed::Embedder::load(&path, &opts).map(|e| e.dim());
    }
}

/// `model.safetensors` (one file): header validation by the `safetensors` crate, then every
/// tensor read.
pub fn safetensors_header(data: &[u8]) {
    let dir = scratch_dir("safetensors_header");
    if std::fs::write(dir.join("model.safetensors"), data).is_err() {
        return;
    }
    if let Ok(store) = WeightStore::open_dir(&dir) {
        exercise_store(&store);
    }
}

/// `model.safetensors.index.json`, then (after a [`SEPARATOR`]) up to eight shards as
/// [`frames`], written as `model-0000i-of-0000n.safetensors`.
pub fn shard_index(data: &[u8]) {
    let dir = scratch_dir("shard_index");
    let (index, rest) = split_first(data);
    if std::fs::write(dir.join("model.safetensors.index.json"), index).is_err() {
        return;
    }
    let shards = rest.map(|r| frames(r, MAX_SHARDS)).unwrap_or_default();
    let n = shards.len();
    for (i, s) in shards.iter().enumerate() {
        let name = format!("model-{:05}-of-{n:05}.safetensors", i + 1);
        if std::fs::write(dir.join(name), s).is_err() {
            return;
        }
    }
    if let Ok(store) = WeightStore::open_dir(&dir) {
        exercise_store(&store);
    }
}

/// `config.json` of any family, with a checkpoint holding no tensor: family detection, the
/// decoder loaders and every encoder config parser run up to their first weight.
pub fn config_json(data: &[u8]) {
    let dir = scratch_dir("config_json");
    let config = dir.join("config.json");
    if std::fs::write(&config, data).is_err()
        || std::fs::write(dir.join("model.safetensors"), EMPTY_SAFETENSORS).is_err()
    {
        return;
    }
    let Ok(be) = CpuCompute::new() else {
        return;
    };
    let _ = decoders::is_decoder_dir(&dir);
    let _ = decoders::load_decoder(&dir, &be).map(|m| m.spec().kv_dim());
    let _ = ModelArchitecture::detect(&config).map(|a| a.name());
    let _ = BertConfig::from_file(&config).map(|c| (c.head_dim(), c.max_sequence_length()));
    if let Ok(store) = WeightStore::open_files(&[], config.clone()) {
        let _ = load_encoder(&config, &store, &be).map(|m| m.spec().head_dim());
    }
}

/// The sentence-transformers files, split on [`SEPARATOR`] in this order: `modules.json`,
/// `1_Pooling/config.json`, `sentence_bert_config.json`, `2_Dense/config.json`,
/// `tokenizer_config.json`. An empty or missing part is an absent file.
pub fn st_config(data: &[u8]) {
    const FILES: [&str; 5] = [
        "modules.json",
        "1_Pooling/config.json",
        "sentence_bert_config.json",
        "2_Dense/config.json",
        "tokenizer_config.json",
    ];
    let dir = scratch_dir("st_config");
    for (part, name) in data.split(|&b| b == SEPARATOR).zip(FILES) {
        if part.is_empty() {
            continue;
        }
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if std::fs::write(&path, part).is_err() {
            return;
        }
    }
    if let Ok(st) = SentenceConfig::read(&dir) {
        let _ = st.pooling.output_dim(8);
    }
}

/// A kin-infer golden file (`kin-infer-golden/1`), read as [`GoldenFile::load`] reads it.
pub fn golden_kin(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    if let Ok(g) = GoldenFile::from_value(&v, Path::new("golden.json")) {
        let _ = g.cases.iter().filter(|c| c.kind.is_decoder()).count();
    }
}

/// `embed` / `bench` input, line by line, in JSON Lines and plain mode.
pub fn embed_jsonl(data: &[u8]) {
    for raw in data.split_inclusive(|&b| b == b'\n') {
        for jsonl in [true, false] {
            if let Ok(Some(item)) = parse_line(raw, jsonl) {
                let _ = item.id.map(|id| id.to_string());
            }
        }
    }
}

/// A sharded corpus run's files (`shards.rs`): frame 0 is an input file (indexed in both
/// modes, shard size from its first byte), frame 1 a `run.json`, frame 2 a shard's records and
/// frame 3 its manifest; then the resume and merge paths read them as a worker and `merge`
/// would (a malformed or inconsistent file is an error, never a panic or a write outside the
/// scratch directory).
pub fn corpus_run(data: &[u8]) {
    use crate::shards;
    let f = frames(data, 4);
    let dir = scratch_dir("corpus_run");
    let input = dir.join("in.txt");
    let first = f.first().copied().unwrap_or_default();
    let _ = std::fs::write(&input, first);
    let shard_items = u64::from(first.first().copied().unwrap_or(1) % 9);
    for jsonl in [true, false] {
        if let Ok(idx) = shards::index_input(&input, jsonl, shard_items) {
            let _ = (idx.items, idx.shards.len());
        }
    }
    let run = dir.join("run");
    let _ = std::fs::create_dir_all(run.join("shards"));
    let _ = std::fs::write(run.join("run.json"), f.get(1).copied().unwrap_or_default());
    let shard = shards::shard_path(&run, 0);
    let _ = std::fs::write(&shard, f.get(2).copied().unwrap_or_default());
    let _ = std::fs::write(
        crate::corpus::manifest_path(&shard),
        f.get(3).copied().unwrap_or_default(),
    );
    if let Ok(r) = shards::load_run(&run) {
        let _ = shards::pending_shards(&run, &r);
        if let Ok((_, at)) = crate::corpus::DurableOutput::open_from(
            &shard,
            r.identity.clone(),
            "in",
            r.index.shards.first().map_or(0, |s| s.start),
        ) {
            let _ = at.items;
        }
    }
    let _ = shards::merge(&run, &dir.join("merged.jsonl"));
}
