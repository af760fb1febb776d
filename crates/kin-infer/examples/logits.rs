//! Teacher-forced logits of a decoder, for comparisons with other engines
//! (scripts/check-llama-cpp.py): every position of one token sequence in a single forward
//! pass, written as little-endian f32, `positions × vocab`, row p being the logits after
//! token p (the distribution of token p + 1).
//!
//! ```sh
//! cargo run --release -p kin-infer --example logits -- MODEL q8|f32|auto "1 2 3" OUT.f32
//! ```
//!
//! Prints the vocabulary size, the row count and the numerics that ran as one JSON line.

use kin_infer::models::decoders::LogitsRows;
use kin_infer::{Activations, Generator, GeneratorOptions};
use std::io::Write;
use std::path::PathBuf;

fn fail(msg: String) -> ! {
    eprintln!("logits: {msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, mode, ids, out] = args.as_slice() else {
        fail("usage: logits MODEL q8|f32|auto \"ID ID ...\" OUT.f32".into())
    };
    let activations =
        Activations::parse(mode).unwrap_or_else(|| fail(format!("unknown activations {mode}")));
    let ids: Vec<u32> = ids
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|t| !t.is_empty())
        .map(|t| {
            t.parse()
                .unwrap_or_else(|_| fail(format!("`{t}` is not a token id")))
        })
        .collect();
    if ids.is_empty() {
        fail("no token ids".into());
    }
    let opts = GeneratorOptions {
        activations: Some(activations),
        ..Default::default()
    };
    let g = Generator::load(&PathBuf::from(model), &opts).unwrap_or_else(|e| fail(e.to_string()));
    let mut session = g.session(ids.len()).unwrap_or_else(|e| fail(e.to_string()));
    let logits = session
        .forward(&ids, LogitsRows::All)
        .unwrap_or_else(|e| fail(e.to_string()));
    let mut f = std::fs::File::create(out).unwrap_or_else(|e| fail(format!("{out}: {e}")));
    let bytes: Vec<u8> = logits.iter().flat_map(|v| v.to_le_bytes()).collect();
    f.write_all(&bytes)
        .unwrap_or_else(|e| fail(format!("{out}: {e}")));
    println!(
        "{{\"vocab\": {}, \"rows\": {}, \"activations\": \"{}\", \"numerics_version\": \"{}\"}}",
        g.spec().vocab_size,
        ids.len(),
        g.numerics().name(),
        g.numerics().version()
    );
}
