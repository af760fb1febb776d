//! Encoders from GGUF files (tests/fixtures/gguf/encoders, written by
//! python/gen_gguf_encoders.py as llama.cpp's BertModel converter writes them):
//! - bert_tiny's F32 GGUF embeds (and gives hidden states) bit for bit as the safetensors
//!   fixture does, with the file's mean pooling, so it meets the same sentence-transformers
//!   golden (which normalizes: `normalize` is asked for, GGUF has no Normalize module);
//! - its WordPiece tokenizer (phantom-space vocabulary respelled) gives the ids of Hugging
//!   Face's BERT tokenizer over the same vocabulary, with and without [CLS]/[SEP];
//! - the config errors name the file.

mod support;

use kin_infer::embed::{Embedder, EmbedderOptions};
use serde_json::Value;
use std::path::PathBuf;
use support::decoder::ids;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

fn gguf() -> PathBuf {
    root().join("gguf/encoders/bert_tiny.f32.gguf")
}

fn bits(v: &[Vec<f32>]) -> Vec<Vec<u32>> {
    v.iter()
        .map(|r| r.iter().map(|x| x.to_bits()).collect())
        .collect()
}

#[test]
fn bert_gguf_embeds_as_the_safetensors_fixture_bit_for_bit() {
    let opts = EmbedderOptions {
        normalize: Some(true),
        ..Default::default()
    };
    let st = Embedder::load(&root().join("bert_tiny"), &opts).unwrap();
    let gg = Embedder::load(&gguf(), &opts).unwrap();
    assert_eq!(gg.pooling(), st.pooling(), "pooling from bert.pooling_type");
    assert_eq!(gg.dim(), st.dim());
    assert_eq!(gg.config().num_hidden_layers, st.config().num_hidden_layers);
    assert_eq!(
        gg.config().max_sequence_length,
        st.config().max_sequence_length
    );
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("bert_tiny/golden.json")).unwrap(),
    )
    .unwrap();
    for case in golden["cases"].as_array().unwrap() {
        // A batch (hidden-state cases) or one sequence (embedding cases).
        let input = case["input_ids"].as_array().unwrap();
        let seqs: Vec<Vec<u32>> = if input.first().is_some_and(Value::is_array) {
            input.iter().map(ids).collect()
        } else {
            vec![ids(&case["input_ids"])]
        };
        let types: Vec<Vec<u32>> = match case["token_type_ids"].as_array() {
            Some(t) => t.iter().map(ids).collect(),
            None => seqs.iter().map(|s| vec![0; s.len()]).collect(),
        };
        let s: Vec<&[u32]> = seqs.iter().map(Vec::as_slice).collect();
        let t: Vec<&[u32]> = types.iter().map(Vec::as_slice).collect();
        assert_eq!(
            bits(&gg.embed_tokens(&s, Some(&t)).unwrap()),
            bits(&st.embed_tokens(&s, Some(&t)).unwrap()),
            "{}: embeddings",
            case["name"]
        );
        assert_eq!(
            bits(&gg.hidden_states(&s, Some(&t)).unwrap()),
            bits(&st.hidden_states(&s, Some(&t)).unwrap()),
            "{}: hidden states",
            case["name"]
        );
    }
    // Without `normalize`, a GGUF's embeddings are the pooled vectors as they are.
    let raw = Embedder::load(&gguf(), &EmbedderOptions::default()).unwrap();
    assert!(!raw.normalize());
}

#[test]
fn bert_gguf_wordpiece_matches_the_reference_tokenizer() {
    let golden: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("gguf/encoders/golden.json")).unwrap(),
    )
    .unwrap();
    let e = Embedder::load(&gguf(), &EmbedderOptions::default()).unwrap();
    let tok = e.tokenizer().expect("the file's tokenizer");
    let cases = golden["cases"].as_array().unwrap();
    assert!(cases.len() >= 8);
    for case in cases {
        let text = case["text"].as_str().unwrap();
        let with = tok.encode_batch(&[text]).unwrap();
        assert_eq!(with[0].ids, ids(&case["ids_with_special"]), "{text:?}");
        let got = e.tokenize(&[text]).unwrap();
        assert_eq!(got[0].ids, ids(&case["ids_with_special"]), "{text:?}");
        let want = ids(&case["ids"]);
        let inner = &got[0].ids;
        assert_eq!(
            &inner[1..inner.len() - 1],
            want.as_slice(),
            "{text:?} (no specials)"
        );
    }
    // Texts embed end to end.
    let v = e.embed_texts(&["hello world", "fn main() { 42 }"]).unwrap();
    assert_eq!(v.len(), 2);
    assert!(v
        .iter()
        .all(|r| r.len() == 48 && r.iter().all(|x| x.is_finite())));
}

#[test]
fn a_decoder_gguf_is_not_an_encoder() {
    let path = root().join("gguf/decoders/llama_gqa.f32.gguf");
    let e = Embedder::load(&path, &EmbedderOptions::default())
        .err()
        .expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("llama") && msg.contains("llama_gqa.f32.gguf"),
        "{msg}"
    );
}
