//! The SSE tier (x86-64 without FMA) is held to tolerance, not bit-identity: its kernels
//! against the generic reference within a relative bound. It still must not depend on m
//! (same operation order), which is checked bit for bit.
#![cfg(target_arch = "x86_64")]

use kin_infer_core::kernels::{for_tier, Kernels, Tier};

mod common;
use common::fill;

fn sse() -> Option<Kernels> {
    match for_tier(Tier::Sse) {
        Ok(k) => Some(k),
        Err(_) => {
            eprintln!("SSE4.1 not supported here: skipped");
            None
        }
    }
}

fn assert_close(what: &str, got: &[f32], want: &[f32], rel: f32) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let bound = rel * w.abs().max(1.0);
        assert!((g - w).abs() <= bound, "{what}[{i}]: {g} vs {w}");
    }
}

#[test]
fn sse_kernels_agree_with_the_generic_reference_within_tolerance() {
    let Some(k) = sse() else { return };
    assert!(!Tier::Sse.exact());
    let g = for_tier(Tier::Generic).unwrap();
    // GEMM, every row count up to past one tile, odd n and k (edge panels, KC blocks).
    for (m, n, kk) in [(1, 9, 5), (5, 17, 300), (13, 33, 513), (7, 8, 64)] {
        let a = fill(1, m * kk);
        let w = fill(2, n * kk);
        let bias = fill(3, n);
        let (pk, pg) = (k.pack_rows(&w, n, kk, kk), g.pack_rows(&w, n, kk, kk));
        let (mut ck, mut cg) = (vec![0.0; m * n], vec![0.0; m * n]);
        k.matmul(&a, kk, m, &pk, Some(&bias), &mut ck, n);
        g.matmul(&a, kk, m, &pg, Some(&bias), &mut cg, n);
        assert_close(&format!("matmul {m}x{n}x{kk}"), &ck, &cg, 1e-5 * kk as f32);
        // One row alone gives the same bits as inside the batch (no dependence on m).
        let mut row = vec![0.0; n];
        k.matmul(&a[(m - 1) * kk..], kk, 1, &pk, Some(&bias), &mut row, n);
        assert_eq!(row, ck[(m - 1) * n..], "row {m} alone vs in the batch");
    }
    for len in [1usize, 3, 4, 17, 64, 1001] {
        let x = fill(len as u64, len);
        let y = fill(7 + len as u64, len);
        let rel = 1e-5 * (len as f32).sqrt().max(1.0);
        assert_close("sum", &[k.sum(&x)], &[g.sum(&x)], rel);
        assert_close("dot", &[k.dot(&x, &y)], &[g.dot(&x, &y)], rel);
        assert_eq!(k.max(&x), g.max(&x), "max is exact");
        type Op = fn(&Kernels, &mut [f32]);
        let ops: [(&str, Op); 5] = [
            ("exp", |k, x| k.exp_inplace(x)),
            ("gelu_erf", |k, x| k.gelu_erf(x)),
            ("gelu_tanh", |k, x| k.gelu_tanh(x)),
            ("silu", |k, x| k.silu(x)),
            ("tanh", |k, x| k.tanh_inplace(x)),
        ];
        for (name, op) in ops {
            let (mut a, mut b) = (x.clone(), x.clone());
            op(&k, &mut a);
            op(&g, &mut b);
            assert_close(name, &a, &b, 1e-5);
        }
        let (mut a, mut b) = (x.clone(), x.clone());
        k.axpy(&mut a, 0.37, &y);
        g.axpy(&mut b, 0.37, &y);
        assert_close("axpy", &a, &b, 1e-6);
        let (w, bias) = (fill(11, len), fill(12, len));
        let (mut a, mut b) = (x.clone(), x.clone());
        k.layer_norm(&mut a, &w, &bias, 1e-5);
        g.layer_norm(&mut b, &w, &bias, 1e-5);
        assert_close("layer_norm", &a, &b, 1e-4);
        let (mut a, mut b) = (x.clone(), x);
        k.softmax(&mut a);
        g.softmax(&mut b);
        assert_close("softmax", &a, &b, 1e-5);
    }
}
