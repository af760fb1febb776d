//! The SSE tier (x86-64 without FMA) is held to tolerance, not bit-identity: whole models
//! against their PyTorch goldens within each golden's `tol` (its kernels against the generic
//! reference: kin-infer-core/tests/sse_kernels.rs).
#![cfg(target_arch = "x86_64")]

mod support;

use kin_infer::golden::{check, GoldenFile};
use kin_infer::kernels::{for_tier, Tier};
use support::{fixture, load, opts};

#[test]
fn encoder_fixtures_pass_their_goldens_on_the_sse_tier() {
    if for_tier(Tier::Sse).is_err() {
        eprintln!("SSE4.1 not supported here: skipped");
        return;
    }
    for name in [
        "bert_tiny",
        "bert_bf16",
        "t5_tiny",
        "deberta_v2_tiny",
        "nomic_tiny",
    ] {
        let dir = fixture(name);
        let golden = GoldenFile::load(&dir.join("golden.json")).unwrap();
        for threads in [1, 2] {
            let e = load(&dir, opts(Tier::Sse, threads));
            let r = check(&e, &golden).unwrap();
            assert!(
                r.compared > 0 && r.passed(),
                "{name}: {} > {}",
                r.max_diff,
                r.tol
            );
            eprintln!("{name} sse ({threads} threads): max |diff| {}", r.max_diff);
        }
    }
}
