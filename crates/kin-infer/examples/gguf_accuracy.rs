//! Logit error of quantized GGUF files against a reference (the F32 file of the same model):
//! one fixed prompt through each file, full-prompt logits compared position by position.
//!
//! ```sh
//! cargo run --release -p kin-infer --example gguf_accuracy -- REF.gguf Q1.gguf [Q2.gguf ...]
//! ```
//!
//! Prints per file: the largest and the root-mean-square |Δ logit|, the mean KL divergence
//! KL(ref ‖ file) of the next-token distributions (nats), and how often the two argmaxes agree.

use kin_infer::gpu::create_compute;
use kin_infer::models::decoders::{load_decoder, LogitsRows};
use std::path::PathBuf;

fn log_softmax(x: &[f32]) -> Vec<f64> {
    let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let z: f64 = x.iter().map(|v| (*v as f64 - m).exp()).sum::<f64>().ln() + m;
    x.iter().map(|v| *v as f64 - z).collect()
}

fn main() {
    let files: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    if files.len() < 2 {
        eprintln!("usage: gguf_accuracy REF.gguf FILE.gguf [FILE.gguf ...]");
        std::process::exit(2);
    }
    let be = create_compute(None).expect("backend");
    let logits = |path: &PathBuf| -> (Vec<f32>, usize) {
        let m = load_decoder(path, be.as_ref()).unwrap_or_else(|e| {
            eprintln!("{}: {e}", path.display());
            std::process::exit(2)
        });
        let vocab = m.spec().vocab_size;
        let n = 64.min(m.spec().max_sequence_length);
        // A fixed pseudo-random prompt inside the vocabulary.
        let ids: Vec<u32> = (0..n as u64)
            .map(|i| ((i * 2_654_435_761 + 17) % vocab as u64) as u32)
            .collect();
        let mut cache = m.new_cache(n).expect("cache");
        let out = m
            .forward(be.as_ref(), &ids, &mut cache, LogitsRows::All)
            .expect("forward");
        (out.to_vec(), vocab)
    };
    let (reference, vocab) = logits(&files[0]);
    println!(
        "reference {} ({} positions)",
        files[0].display(),
        reference.len() / vocab
    );
    for f in &files[1..] {
        let (got, v) = logits(f);
        assert_eq!(v, vocab, "{}: another vocabulary", f.display());
        let (mut max, mut sq, mut kl, mut agree) = (0f64, 0f64, 0f64, 0usize);
        let rows = got.len() / vocab;
        for (r, g) in reference.chunks_exact(vocab).zip(got.chunks_exact(vocab)) {
            for (a, b) in r.iter().zip(g) {
                let d = (*a as f64 - *b as f64).abs();
                max = max.max(d);
                sq += d * d;
            }
            let (lp, lq) = (log_softmax(r), log_softmax(g));
            kl += lp
                .iter()
                .zip(&lq)
                .map(|(p, q)| p.exp() * (p - q))
                .sum::<f64>();
            let am = |x: &[f32]| (0..x.len()).max_by(|&i, &j| x[i].total_cmp(&x[j])).unwrap();
            agree += (am(r) == am(g)) as usize;
        }
        println!(
            "{}: max |Δ| {max:.4}, rms |Δ| {:.4}, mean KL {:.5} nats, argmax agrees {agree}/{rows}",
            f.display(),
            (sq / got.len() as f64).sqrt(),
            kl / rows as f64
        );
    }
}
