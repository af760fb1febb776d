//! Embedding throughput on random token ids, for models without a tokenizer (the test
//! fixtures of every encoder family), so a change to shared code can be timed on each family:
//!
//!     cargo run --release -p kin-infer --example embed_ids_bench -- DIR [SEQS] [ROUNDS]
//!
//! Embeds SEQS (default 512) sequences of 8..=max_length random in-vocabulary ids in batches
//! of 32, ROUNDS (default 5) times, and prints the best sequences/s as JSON. Ids come from a
//! fixed-seed generator, so two builds time the same work.

use kin_infer::{Embedder, EmbedderOptions};
use std::path::Path;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let dir = args
        .get(1)
        .expect("usage: embed_ids_bench DIR [SEQS] [ROUNDS]");
    let n: usize = args.get(2).map_or(512, |s| s.parse().expect("SEQS"));
    let rounds: usize = args.get(3).map_or(5, |s| s.parse().expect("ROUNDS"));
    let e = Embedder::load(Path::new(dir), &EmbedderOptions::default()).expect("load");
    let (vocab, max_len) = (e.config().vocab_size as u64, e.max_length());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let seqs: Vec<Vec<u32>> = (0..n)
        .map(|_| {
            let len = 8 + (next() as usize) % (max_len.max(9) - 7);
            (0..len.min(max_len))
                .map(|_| (next() % vocab) as u32)
                .collect()
        })
        .collect();
    let mut best = 0.0f64;
    for _ in 0..rounds {
        let t = Instant::now();
        for batch in seqs.chunks(32) {
            let refs: Vec<&[u32]> = batch.iter().map(|s| s.as_slice()).collect();
            std::hint::black_box(e.embed_tokens(&refs, None).expect("embed"));
        }
        best = best.max(n as f64 / t.elapsed().as_secs_f64());
    }
    println!("{{\"model\":\"{dir}\",\"seqs\":{n},\"seqs_per_s_max\":{best:.1}}}");
}
