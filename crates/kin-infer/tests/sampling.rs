//! Sampling and the generation loop: each filter on hand-built distributions (top-k keeps
//! exactly k, top-p the smallest prefix reaching p, min-p relative to the most likely token),
//! the penalties' effect on the chosen logits, seed reproducibility, greedy equal to
//! `generate_greedy` on the LLaMA fixture, and the stop conditions (EOS, stop strings, max
//! tokens, context) with streaming.

use kin_infer::generate::sampling::{apply_penalties, draw, filter_candidates};
use kin_infer::generate::{
    eos_token_ids, generate, generate_greedy, Detokenize, Rng, Sampler, SamplingParams, StopReason,
};
use kin_infer::gpu::create_compute;
use kin_infer::models::decoders::load_decoder;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

fn params() -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        ..SamplingParams::default()
    }
}

/// (id, logit) candidates whose softmax is exactly `probs` (logits = ln p).
fn cands(probs: &[f64]) -> Vec<(u32, f32)> {
    probs
        .iter()
        .enumerate()
        .map(|(i, &p)| (i as u32, p.ln() as f32))
        .collect()
}

fn kept_ids(c: &[(u32, f32)], n: usize) -> Vec<u32> {
    c[..n].iter().map(|x| x.0).collect()
}

#[test]
fn top_k_keeps_exactly_k() {
    let probs = [0.05, 0.3, 0.1, 0.2, 0.15, 0.2];
    for k in 1..=6 {
        let mut c = cands(&probs);
        let p = SamplingParams {
            top_k: k,
            ..params()
        };
        let n = filter_candidates(&mut c, &p);
        assert_eq!(n, k);
        // Descending, ties (ids 3 and 5) by the lower id.
        assert_eq!(kept_ids(&c, n), [1, 3, 5, 4, 2, 0][..k].to_vec());
        let sum: f32 = c[..n].iter().map(|x| x.1).sum();
        assert!((sum - 1.0).abs() < 1e-5, "renormalized over the top k");
    }
    // k larger than the vocabulary keeps everything.
    let mut c = cands(&probs);
    let n = filter_candidates(
        &mut c,
        &SamplingParams {
            top_k: 100,
            ..params()
        },
    );
    assert_eq!(n, 6);
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    let probs = [0.1, 0.4, 0.25, 0.15, 0.1];
    // Sorted: 0.4, 0.25, 0.15, 0.1, 0.1 → cumulative 0.4, 0.65, 0.8, 0.9, 1.0.
    for (p, want) in [
        (0.3, 1),
        (0.4, 1),
        (0.5, 2),
        (0.65, 2),
        (0.7, 3),
        (0.85, 4),
        (0.95, 5),
        (1.0, 5),
    ] {
        let mut c = cands(&probs);
        let n = filter_candidates(
            &mut c,
            &SamplingParams {
                top_p: p,
                ..params()
            },
        );
        // 0.4 and 0.65 sit on a boundary: f32 rounding of the cumulative sum may need one
        // more token there, never fewer.
        if p == 0.4 || p == 0.65 {
            assert!(n == want || n == want + 1, "p {p}: kept {n}");
        } else {
            assert_eq!(n, want, "p {p}");
        }
        assert_eq!(kept_ids(&c, n), [1, 2, 3, 0, 4][..n].to_vec());
    }
    // A tiny p keeps the single most likely token.
    let mut c = cands(&probs);
    let n = filter_candidates(
        &mut c,
        &SamplingParams {
            top_p: 1e-6,
            ..params()
        },
    );
    assert_eq!(n, 1);
}

#[test]
fn min_p_is_relative_to_the_most_likely_token() {
    let probs = [0.05, 0.5, 0.2, 0.15, 0.1];
    // Floors: 0.1 × 0.5 = 0.05 keeps all; 0.25 → ≥ 0.125: 0.5, 0.2, 0.15; 0.5 → ≥ 0.25: 0.5.
    for (m, want) in [(0.09, 5), (0.25, 3), (0.35, 2), (0.5, 1), (1.0, 1)] {
        let mut c = cands(&probs);
        let n = filter_candidates(
            &mut c,
            &SamplingParams {
                min_p: m,
                ..params()
            },
        );
        assert_eq!(n, want, "min_p {m}");
    }
    // The same relative floor on a flatter distribution keeps more tokens.
    let flat = [0.22, 0.2, 0.2, 0.19, 0.19];
    let mut c = cands(&flat);
    let n = filter_candidates(
        &mut c,
        &SamplingParams {
            min_p: 0.5,
            ..params()
        },
    );
    assert_eq!(n, 5);
}

#[test]
fn filters_compose_in_order() {
    // top-k 3 → {0.4, 0.3, 0.2} renormalized to {0.444, 0.333, 0.222}; top-p 0.7 → 2 tokens;
    // min-p 0.8 → only the first (0.333 < 0.8 × 0.444).
    let probs = [0.4, 0.3, 0.2, 0.1];
    let mut c = cands(&probs);
    let p = SamplingParams {
        top_k: 3,
        top_p: 0.7,
        ..params()
    };
    assert_eq!(filter_candidates(&mut c, &p), 2);
    assert!((c[0].1 - 0.4 / 0.9).abs() < 1e-5);
    let mut c = cands(&probs);
    let p = SamplingParams { min_p: 0.8, ..p };
    assert_eq!(filter_candidates(&mut c, &p), 1);
}

#[test]
fn temperature_sharpens_and_flattens() {
    let logits = [1.0f32, 2.0, 3.0];
    let top = |t: f32| {
        let mut c: Vec<(u32, f32)> = logits
            .iter()
            .enumerate()
            .map(|(i, &l)| (i as u32, l / t))
            .collect();
        filter_candidates(&mut c, &params());
        c[0].1
    };
    assert!(top(0.5) > top(1.0) && top(1.0) > top(2.0));
    assert!(top(0.01) > 0.999);
}

#[test]
fn penalties_change_only_seen_tokens() {
    let logits = [2.0f32, -2.0, 1.0, 0.5];
    let counts = [1u32, 2, 0, 3];
    let p = SamplingParams {
        repetition_penalty: 2.0,
        ..params()
    };
    let mut l = logits;
    apply_penalties(&mut l, &counts, &p);
    assert_eq!(
        l,
        [1.0, -4.0, 1.0, 0.25],
        "positive divided, negative multiplied"
    );

    let p = SamplingParams {
        frequency_penalty: 0.5,
        presence_penalty: 0.25,
        ..params()
    };
    let mut l = logits;
    apply_penalties(&mut l, &counts, &p);
    assert_eq!(l, [2.0 - 0.75, -2.0 - 1.25, 1.0, 0.5 - 1.75]);

    // Greedy with a repetition penalty moves away from a repeated favourite.
    let mut s = Sampler::new(
        SamplingParams {
            temperature: 0.0,
            repetition_penalty: 3.0,
            ..SamplingParams::default()
        },
        4,
    )
    .unwrap();
    let row = [3.0f32, 2.0, 0.0, 0.0];
    assert_eq!(s.sample(&row), 0);
    s.observe(&[0]);
    assert_eq!(s.sample(&row), 1, "3/3 = 1 < 2");
}

#[test]
fn seeds_are_reproducible_and_differ_on_a_flat_distribution() {
    let flat = vec![0.0f32; 1000];
    let run = |seed: u64| {
        let mut s = Sampler::new(SamplingParams { seed, ..params() }, flat.len()).unwrap();
        (0..32).map(|_| s.sample(&flat)).collect::<Vec<u32>>()
    };
    assert_eq!(run(7), run(7));
    assert_ne!(run(7), run(8));
    // Spread: a flat distribution is not stuck on a few ids.
    let mut ids = run(1);
    ids.sort();
    ids.dedup();
    assert!(ids.len() > 20, "{ids:?}");
    // The generator's stream is pinned (the same on every platform).
    let mut r = Rng::new(0);
    assert_eq!(r.next_u64(), 0x99EC_5F36_CB75_F2B4);
    let u = Rng::new(42).next_f64();
    assert!((0.0..1.0).contains(&u));
}

#[test]
fn draw_follows_the_cumulative_mass() {
    let kept = [(5u32, 0.5f32), (6, 0.3), (7, 0.2)];
    assert_eq!(draw(&kept, 0.0), 5);
    assert_eq!(draw(&kept, 0.49), 5);
    assert_eq!(draw(&kept, 0.51), 6);
    assert_eq!(draw(&kept, 0.79), 6);
    assert_eq!(draw(&kept, 0.81), 7);
    assert_eq!(draw(&kept, 0.999_999), 7);
}

#[test]
fn invalid_parameters_name_the_field() {
    for (p, field) in [
        (
            SamplingParams {
                temperature: -1.0,
                ..params()
            },
            "temperature",
        ),
        (
            SamplingParams {
                top_p: 0.0,
                ..params()
            },
            "top_p",
        ),
        (
            SamplingParams {
                min_p: 1.5,
                ..params()
            },
            "min_p",
        ),
        (
            SamplingParams {
                repetition_penalty: 0.0,
                ..params()
            },
            "repetition_penalty",
        ),
    ] {
        let e = Sampler::new(p, 10).err().unwrap().to_string();
        assert!(e.contains(field), "{e}");
    }
}

// ---- the generation loop on the LLaMA fixture ----

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/decoder_fixtures")
        .join(name)
}

const PROMPT: [u32; 7] = [121, 10, 100, 100, 28, 113, 123];

/// A toy detokenizer: id n → "<n>".
struct Angle;
impl Detokenize for Angle {
    fn decode(&self, ids: &[u32]) -> kin_infer::Result<String> {
        Ok(ids.iter().map(|i| format!("<{i}>")).collect())
    }
}

#[test]
fn greedy_equals_generate_greedy_and_streams_each_token() {
    let be = create_compute(None).unwrap();
    let m = load_decoder(&fixture("llama_gqa"), be.as_ref()).unwrap();
    let want = generate_greedy(m.as_ref(), be.as_ref(), &PROMPT, 12, |_| {}).unwrap();
    let mut streamed = vec![];
    let p = SamplingParams {
        max_new_tokens: 12,
        ..SamplingParams::default()
    };
    let g = generate(m.as_ref(), be.as_ref(), &PROMPT, &p, None, |e| {
        assert_eq!(e.index, streamed.len());
        streamed.push(e.id);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(g.tokens, want);
    assert_eq!(streamed, want);
    assert_eq!(g.stop_reason, StopReason::MaxTokens);
    assert_eq!(g.decode_steps, 11);
    assert_eq!(g.prompt_tokens, 7);
    // The golden's greedy case.
    assert_eq!(&want[..8], &[79, 65, 106, 47, 100, 61, 73, 40]);

    // Sampling with a seed: reproducible, and its first token comes from the same logits.
    let sp = SamplingParams {
        temperature: 1.5,
        top_k: 40,
        seed: 3,
        ..p.clone()
    };
    let run = |sp: &SamplingParams| {
        generate(m.as_ref(), be.as_ref(), &PROMPT, sp, None, |_| {
            ControlFlow::Continue(())
        })
        .unwrap()
        .tokens
    };
    assert_eq!(run(&sp), run(&sp));
    let a: Vec<Vec<u32>> = (0..4)
        .map(|s| {
            run(&SamplingParams {
                seed: s,
                ..sp.clone()
            })
        })
        .collect();
    assert!(
        a.iter().any(|x| x != &a[0]),
        "different seeds should differ"
    );
}

#[test]
fn stops_on_eos_stop_string_context_and_cancel() {
    let be = create_compute(None).unwrap();
    let m = load_decoder(&fixture("llama_gqa"), be.as_ref()).unwrap();
    let greedy = generate_greedy(m.as_ref(), be.as_ref(), &PROMPT, 8, |_| {}).unwrap();
    let base = SamplingParams {
        max_new_tokens: 8,
        ..SamplingParams::default()
    };
    let cont = |_: &kin_infer::generate::TokenEvent| ControlFlow::Continue(());

    // EOS: the third greedy token, treated as EOS, ends the run and is kept in the ids.
    let p = SamplingParams {
        eos_token_ids: vec![greedy[2]],
        ..base.clone()
    };
    let g = generate(m.as_ref(), be.as_ref(), &PROMPT, &p, None, cont).unwrap();
    assert_eq!(g.stop_reason, StopReason::Eos);
    assert_eq!(g.tokens, greedy[..3]);

    // Stop string spanning tokens 2 and 3: the text ends before it; the stream never shows it.
    let stop = format!("{}><{}", greedy[1], greedy[2]);
    let p = SamplingParams {
        stop: vec![stop.clone()],
        ..base.clone()
    };
    let mut streamed = String::new();
    let g = generate(m.as_ref(), be.as_ref(), &PROMPT, &p, Some(&Angle), |e| {
        streamed.push_str(e.text);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(g.stop_reason, StopReason::StopString);
    assert_eq!(g.tokens, greedy[..3]);
    let want = format!("<{}><", greedy[0]);
    assert_eq!(g.text.as_deref(), Some(want.as_str()));
    assert_eq!(streamed, want);

    // Full text streamed when no stop string matches.
    let mut streamed = String::new();
    let g = generate(m.as_ref(), be.as_ref(), &PROMPT, &base, Some(&Angle), |e| {
        streamed.push_str(e.text);
        ControlFlow::Continue(())
    })
    .unwrap();
    let full: String = greedy.iter().map(|i| format!("<{i}>")).collect();
    assert_eq!(g.text.as_deref(), Some(full.as_str()));
    assert_eq!(streamed, full);

    // Stop strings without a tokenizer: a clear error.
    let e = generate(m.as_ref(), be.as_ref(), &PROMPT, &p, None, cont)
        .unwrap_err()
        .to_string();
    assert!(e.contains("tokenizer"), "{e}");

    // Context: the fixture holds 64 positions; a 60-token prompt leaves room for 5 tokens.
    let ctx = m.spec().max_sequence_length;
    let long: Vec<u32> = (0..ctx as u32 - 4).map(|i| 3 + i % 100).collect();
    let p = SamplingParams {
        max_new_tokens: 50,
        ..base.clone()
    };
    let g = generate(m.as_ref(), be.as_ref(), &long, &p, None, cont).unwrap();
    assert_eq!(g.stop_reason, StopReason::Context);
    assert_eq!(g.tokens.len(), 5);
    // A prompt longer than the context is an error.
    let too_long: Vec<u32> = (0..ctx as u32 + 1).map(|i| i % 100).collect();
    let e = generate(m.as_ref(), be.as_ref(), &too_long, &p, None, cont)
        .unwrap_err()
        .to_string();
    assert!(e.contains("exceeds the model's context"), "{e}");
    // Unknown id.
    let e = generate(m.as_ref(), be.as_ref(), &[5, 100_000], &p, None, cont)
        .unwrap_err()
        .to_string();
    assert!(e.contains("outside the vocabulary"), "{e}");

    // The callback can stop the run.
    let g = generate(m.as_ref(), be.as_ref(), &PROMPT, &base, None, |e| {
        if e.index == 1 {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    })
    .unwrap();
    assert_eq!(g.stop_reason, StopReason::Cancelled);
    assert_eq!(g.tokens, greedy[..2]);
}

#[test]
fn eos_ids_come_from_generation_config_then_config() {
    let be = create_compute(None).unwrap();
    let src = fixture("llama_gqa");
    let m = load_decoder(&src, be.as_ref()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    assert_eq!(
        eos_token_ids(d, m.spec()).unwrap(),
        vec![2],
        "config.json's"
    );
    std::fs::write(
        d.join("generation_config.json"),
        r#"{"eos_token_id": [7, 9]}"#,
    )
    .unwrap();
    assert_eq!(eos_token_ids(d, m.spec()).unwrap(), vec![7, 9]);
    std::fs::write(d.join("generation_config.json"), r#"{"eos_token_id": 11}"#).unwrap();
    assert_eq!(eos_token_ids(d, m.spec()).unwrap(), vec![11]);
    std::fs::write(d.join("generation_config.json"), r#"{"bos_token_id": 1}"#).unwrap();
    assert_eq!(eos_token_ids(d, m.spec()).unwrap(), vec![2]);
    std::fs::write(d.join("generation_config.json"), r#"{"eos_token_id": "x"}"#).unwrap();
    let e = eos_token_ids(d, m.spec()).unwrap_err().to_string();
    assert!(
        e.contains("generation_config.json") && e.contains("eos_token_id"),
        "{e}"
    );
    std::fs::write(d.join("generation_config.json"), "{oops").unwrap();
    let e = eos_token_ids(d, m.spec()).unwrap_err().to_string();
    assert!(e.contains("invalid JSON"), "{e}");
}
