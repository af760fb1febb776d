//! Bidirectional attention gives the same bits on the calling thread (outside any pool: the
//! edge runtime's path, per-thread scratch, no allocation once warm) and inside a rayon pool
//! (heads in parallel). The pool case uses sequences long enough that each head's GEMM forks
//! (len² · head_dim ≥ 2^18): a worker waiting on its fork may run another head task, so the
//! per-thread scratch is taken out of its cell for a call, never borrowed across the wait
//! (a review found the borrow; the interleaving that would panic is rare and this test does
//! not force it, but it runs the path).

use kin_infer::backend::{create_compute, SeqAttn, SeqSpan};

fn fill(seed: u64, len: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

#[test]
fn attention_bits_match_on_and_off_a_pool_with_forking_heads() {
    let be = create_compute(None).unwrap();
    let (heads, hd) = (8, 64);
    let hidden = heads * hd;
    let lens = [200usize, 7, 160, 1, 96];
    let mut seqs = Vec::new();
    let mut start = 0;
    for &len in &lens {
        seqs.push(SeqSpan { start, len });
        start += len;
    }
    let qkv = be.upload(fill(5, start * 3 * hidden));
    let scale = 1.0 / (hd as f32).sqrt();
    let run = |be: &dyn kin_infer::backend::Backend| {
        let mut out = be.zeros(start * hidden);
        let shape = SeqAttn {
            heads,
            head_dim: hd,
            scale,
            bias: None,
        };
        be.attention(qkv.view(), &seqs, &shape, out.at_mut(..));
        let mut staging = Vec::new();
        be.read(out.view(), &mut staging).to_vec()
    };
    let serial = run(be.as_ref());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .unwrap();
    for round in 0..8 {
        let parallel = pool.install(|| run(be.as_ref()));
        let same = serial
            .iter()
            .zip(&parallel)
            .all(|(a, b)| a.to_bits() == b.to_bits());
        assert!(
            same,
            "round {round}: parallel attention differs from serial"
        );
    }
    // A second, shorter shape on the same threads reuses (and re-sizes) the scratch.
    let again = run(be.as_ref());
    assert!(serial
        .iter()
        .zip(&again)
        .all(|(a, b)| a.to_bits() == b.to_bits()));
}
