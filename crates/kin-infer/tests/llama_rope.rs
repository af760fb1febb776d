//! LLaMA rope scaling types against the transformers 5.24 goldens of
//! python/gen_fixtures_llama_rope.py (tests/decoder_fixtures/llama_rope_linear: `linear` x2 in
//! the Hub spelling; llama_rope_llama3: `llama3` x8 with bands that matter; llama_rope_dynamic:
//! `dynamic` x2 past max_position_embeddings 16): full-prompt logits within `tol`, greedy tokens
//! exactly, incremental decoding equal to the full forward bit for bit (for `dynamic`: only while
//! the sequence stays within max_position_embeddings, see below), 1 vs 2 threads and every SIMD
//! tier bit-identical, both config spellings read alike, and clear errors for bad rope fields.
//!
//! `dynamic` by construction: transformers (`dynamic_rope_update`) recomputes the frequencies
//! from the length `L` of the sequence at each forward call once `L > max_position_embeddings`
//! and rotates only that call's tokens with them; keys already in the KV cache keep the rotation
//! they got. A full pass over `L` tokens rotates every position with the frequencies of `L`,
//! decoding token by token rotates position `p` with those of `p + 1`: past the limit the two
//! differ (asserted below), and transformers' `generate` (the golden) is the token-by-token one.

mod support;

use support::decoder::{
    assert_goldens_match, assert_identical_across_threads_and_tiers,
    assert_incremental_equals_full, bits, chunked_logits, config, context_up_to_40, full_logits,
    load, prompt, standard_splits, with_config,
};

use kin_infer::generate::generate_greedy;
use kin_infer::gpu::{create_compute, GpuCompute};
use kin_infer::models::decoders::{load_decoder, Decoder};
use serde_json::{json, Value};

const FIXTURES: [&str; 3] = [
    "llama_rope_linear",
    "llama_rope_llama3",
    "llama_rope_dynamic",
];

/// Loads fixture `name`'s weights with the config `cfg` (from a temporary directory).
fn load_with(
    name: &str,
    cfg: &Value,
    tag: &str,
    be: &dyn GpuCompute,
) -> kin_infer::Result<Box<dyn Decoder>> {
    let dir = with_config("llama-rope", name, &format!("{name}-{tag}"), cfg);
    let m = load_decoder(&dir, be);
    std::fs::remove_dir_all(&dir).ok();
    m
}

#[test]
fn logits_and_greedy_tokens_match_transformers() {
    assert_goldens_match(&FIXTURES, false, |_, _| {});
}

#[test]
fn incremental_decoding_equals_the_full_forward_bit_for_bit() {
    assert_incremental_equals_full(
        &["llama_rope_linear", "llama_rope_llama3"],
        context_up_to_40,
        standard_splits,
    );
}

/// `dynamic`: within max_position_embeddings (16) every chunking equals the full pass bit for
/// bit; past it, a chunk rotates with the frequencies of the length it ends at, so the full pass
/// differs from token-by-token decoding, while equal chunkings stay bit-identical.
#[test]
fn dynamic_incremental_decoding_within_and_past_the_original_context() {
    let be = create_compute(None).unwrap();
    let m = load("llama_rope_dynamic", be.as_ref());
    let (vocab, limit) = (m.spec().vocab_size, 16);
    assert_eq!(
        m.spec().max_sequence_length,
        2 * limit,
        "context = mpe x factor"
    );
    let p = prompt(limit, vocab);
    let full = full_logits(m.as_ref(), be.as_ref(), &p);
    for split in [
        vec![1],
        vec![5],
        vec![7, 1],
        vec![3, 10, 2],
        vec![limit - 1],
    ] {
        assert!(
            bits(&chunked_logits(m.as_ref(), be.as_ref(), &p, &split)) == bits(&full),
            "dynamic within the limit: chunks {split:?} differ from the full pass"
        );
    }
    let n = 23;
    let p = prompt(n, vocab);
    let full = full_logits(m.as_ref(), be.as_ref(), &p);
    // Rows of the first 16 positions: a prefill of 16 uses the plain frequencies, the full pass
    // over 23 tokens the rescaled ones.
    let stepwise = chunked_logits(m.as_ref(), be.as_ref(), &p, &[limit]);
    assert!(bits(&stepwise[..limit * vocab]) != bits(&full[..limit * vocab]));
    assert!(bits(&stepwise[limit * vocab..]) != bits(&full[limit * vocab..]));
    // The last chunk ending at 23 sees the same frequencies either way: a prefill of all 23
    // tokens as one chunk is the full pass, bit for bit.
    assert!(bits(&chunked_logits(m.as_ref(), be.as_ref(), &p, &[n])) == bits(&full));
    // Decoding is a function of the chunking: the same chunks give the same bits.
    assert!(bits(&chunked_logits(m.as_ref(), be.as_ref(), &p, &[limit])) == bits(&stepwise));
    // Past the context (32): a clear error.
    let e = generate_greedy(m.as_ref(), be.as_ref(), &prompt(30, vocab), 4, |_| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("context") && e.contains("32"), "{e}");
}

#[test]
fn identical_across_threads_and_tiers() {
    // 20 + 8 tokens: past the dynamic fixture's original 16 positions.
    let p: Vec<u32> = (0..20u32).map(|i| (i * 13 + 5) % 120).collect();
    assert_identical_across_threads_and_tiers(&FIXTURES, &p);
}

/// The Hub spelling (`rope_scaling` with `type` or `rope_type`, top-level `rope_theta`) and
/// transformers 5.x's (`rope_parameters` with `rope_type` and `rope_theta`) give the same bits.
#[test]
fn both_config_spellings_read_alike() {
    let be = create_compute(None).unwrap();
    for name in FIXTURES {
        let m = load(name, be.as_ref());
        let p = prompt(20, m.spec().vocab_size);
        let want = bits(&full_logits(m.as_ref(), be.as_ref(), &p));
        let cfg = config(name);
        let (mut rope, theta) = match cfg.get("rope_parameters") {
            Some(rp) => {
                let mut rp = rp.clone();
                let theta = rp.as_object_mut().unwrap().remove("rope_theta").unwrap();
                (rp, theta)
            }
            None => (cfg["rope_scaling"].clone(), cfg["rope_theta"].clone()),
        };
        let o = rope.as_object_mut().unwrap();
        let kind = o.remove("rope_type").or_else(|| o.remove("type")).unwrap();
        let mut variants = vec![];
        for key in ["type", "rope_type"] {
            let mut c = cfg.clone();
            let co = c.as_object_mut().unwrap();
            co.remove("rope_parameters");
            let mut r = rope.clone();
            r[key] = kind.clone();
            co.insert("rope_scaling".into(), r);
            co.insert("rope_theta".into(), theta.clone());
            variants.push((format!("hub-{key}"), c));
        }
        let mut c = cfg.clone();
        let co = c.as_object_mut().unwrap();
        co.remove("rope_scaling");
        co.remove("rope_theta");
        let mut r = rope.clone();
        r["rope_type"] = kind.clone();
        r["rope_theta"] = theta.clone();
        co.insert("rope_parameters".into(), r);
        variants.push(("v5".into(), c));
        for (tag, c) in variants {
            let m2 = load_with(name, &c, &tag, be.as_ref())
                .unwrap_or_else(|e| panic!("{name} {tag}: {e}"));
            assert_eq!(m2.spec().positions, m.spec().positions, "{name} {tag}");
            assert!(
                bits(&full_logits(m2.as_ref(), be.as_ref(), &p)) == want,
                "{name}: spelling {tag} gives other logits"
            );
        }
    }
}

#[test]
fn bad_rope_fields_are_clear_errors() {
    let be = create_compute(None).unwrap();
    // The Hub's `rope_scaling` (linear) and transformers 5's `rope_parameters` (llama3).
    const LINEAR: &str = "llama_rope_linear";
    const LLAMA3: &str = "llama_rope_llama3";
    let rope_key = |name: &str| match name {
        LINEAR => "rope_scaling",
        _ => "rope_parameters",
    };
    // (fixture, tag, key in its rope object ("": the object itself), value (null: removed),
    // what the error names). yarn and longrope are unsupported kinds, the rest config errors.
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Value,
        &'static [&'static str],
    );
    let cases: [Case; 8] = [
        (
            LINEAR,
            "nofactor",
            "factor",
            Value::Null,
            &["rope_scaling.factor", "required"],
        ),
        (
            LINEAR,
            "negfactor",
            "factor",
            json!(-2.0),
            &["rope_scaling.factor", "positive"],
        ),
        (
            LINEAR,
            "strfactor",
            "factor",
            json!("two"),
            &["rope_scaling.factor", "number"],
        ),
        (
            LINEAR,
            "yarn",
            "type",
            json!("yarn"),
            &["yarn", "linear, dynamic, llama3"],
        ),
        (LINEAR, "notobj", "", json!(2), &["rope_scaling", "object"]),
        (
            LLAMA3,
            "bands",
            "high_freq_factor",
            json!(0.5),
            &["rope_parameters.high_freq_factor", "low_freq_factor"],
        ),
        (
            LLAMA3,
            "orig",
            "original_max_position_embeddings",
            json!(0),
            &["original_max_position_embeddings"],
        ),
        (
            LLAMA3,
            "longrope",
            "rope_type",
            json!("longrope"),
            &["longrope"],
        ),
    ];
    for (name, tag, key, value, needles) in cases {
        let unsupported = matches!(tag, "yarn" | "longrope");
        let mut cfg = config(name);
        let rope = &mut cfg[rope_key(name)];
        match (key, value) {
            ("", v) => *rope = v,
            (k, Value::Null) => {
                rope.as_object_mut().unwrap().remove(k);
            }
            (k, v) => rope[k] = v,
        }
        let e = load_with(name, &cfg, tag, be.as_ref())
            .err()
            .unwrap_or_else(|| panic!("{tag} must fail"));
        assert_eq!(
            matches!(e, kin_infer::InferError::Unsupported(_)),
            unsupported,
            "{tag}: {e:?}"
        );
        let s = e.to_string();
        for n in needles {
            assert!(s.contains(n), "{tag}: `{n}` not in {s}");
        }
    }
    // llama3 without original_max_position_embeddings: max_position_embeddings (as transformers).
    let mut c = config(LLAMA3);
    c["rope_parameters"]
        .as_object_mut()
        .unwrap()
        .remove("original_max_position_embeddings");
    let m = load_with(LLAMA3, &c, "noorig", be.as_ref()).unwrap();
    assert!(
        m.spec().positions.contains("original context 128"),
        "{}",
        m.spec().positions
    );
}
