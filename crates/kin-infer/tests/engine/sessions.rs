//! The session API: one loaded [`Generator`] (immutable, shared) serves several sessions from
//! several threads at once, each with its own KV cache and scratch, and every session gets
//! exactly the bits it gets alone. Errors carry a kind a server maps to a status code.

use kin_infer::generate::argmax;
use kin_infer::models::decoders::LogitsRows;
use kin_infer::{ErrorKind, Generator, GeneratorOptions};
use std::path::Path;

fn generator(name: &str, threads: usize) -> Generator {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/decoder_fixtures")
        .join(name);
    Generator::load(
        &dir,
        &GeneratorOptions {
            threads: Some(threads),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("load {name}: {e}"))
}

/// Prefill `prompt`, then `steps` greedy tokens; the bits of every step's logits.
fn run(g: &Generator, prompt: &[u32], steps: usize) -> Vec<Vec<u32>> {
    let mut s = g.session(prompt.len() + steps).unwrap();
    let mut out = Vec::new();
    let mut logits = s.forward(prompt, LogitsRows::Last).unwrap().to_vec();
    for _ in 0..steps {
        out.push(logits.iter().map(|v| v.to_bits()).collect());
        let next = argmax(&logits);
        logits = s.forward(&[next], LogitsRows::Last).unwrap().to_vec();
    }
    out
}

#[test]
fn sessions_on_one_model_from_many_threads_match_each_alone() {
    for name in ["llama_gqa", "gpt2_small", "gemma2_sw", "phi_partial"] {
        let g = generator(name, 2);
        let vocab = g.spec().vocab_size as u32;
        let prompts: Vec<Vec<u32>> = (0..4u32)
            .map(|p| (0..5 + p).map(|i| (i * 7 + p * 13 + 1) % vocab).collect())
            .collect();
        let alone: Vec<_> = prompts.iter().map(|p| run(&g, p, 6)).collect();
        let together: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = prompts
                .iter()
                .map(|p| {
                    let g = &g;
                    scope.spawn(move || run(g, p, 6))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(alone, together, "{name}: concurrent sessions changed bits");
    }
}

#[test]
fn session_errors_have_kinds() {
    let g = generator("llama_gqa", 1);
    let ctx = g.spec().max_sequence_length;
    let vocab = g.spec().vocab_size as u32;
    let mut s = g.session(4).unwrap();
    let e = s.forward(&[1, vocab], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TokenOutOfVocabulary, "{e}");
    let e = s.forward(&[1, 2, 3, 4, 5], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    assert!(e.to_string().contains("capacity"), "{e}");
    assert_eq!(s.len(), 0, "a failed forward leaves the session unchanged");
    let e = s.forward(&[], LogitsRows::Last).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    let e = g.session(ctx + 1).err().expect("a cache past the context");
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let e = g.session(0).err().expect("an empty cache");
    assert_eq!(e.kind(), ErrorKind::InvalidInput, "{e}");
    // The generation loop's own checks carry the same kind.
    let params = kin_infer::generate::SamplingParams {
        max_new_tokens: ctx + 1,
        ..Default::default()
    };
    let e = g
        .generate(&[1, 2], &params, None, |_| {
            std::ops::ControlFlow::Continue(())
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let long: Vec<u32> = vec![1; ctx + 1];
    let e = g
        .generate(&long, &Default::default(), None, |_| {
            std::ops::ControlFlow::Continue(())
        })
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::ContextExceeded, "{e}");
    let e = Generator::load(
        Path::new("/nonexistent/model"),
        &GeneratorOptions::default(),
    )
    .err()
    .expect("no such directory");
    assert_eq!(e.kind(), ErrorKind::NotFound, "{e}");
}
