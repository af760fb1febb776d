//! Every op of the seam on a GPU backend against the CPU backend on the same random data
//! (features `wgpu`, `cuda`; the backend `KIN_INFER_BACKEND` names: scripts/test-wgpu.sh runs
//! it on lavapipe in CI, scripts/run-gpu-tests.sh on a real GPU). The model-level tests
//! (crates/kin-infer/tests/gpu.rs) cover the ops in context; this covers each one alone,
//! including the ones only inMotion's models use (matmul, transpose, softmax, row_axpy) and
//! quantized weights. Within a relative 2e-5: a GPU's exp, sqrt and division are its own.
#![cfg(any(feature = "wgpu", feature = "cuda"))]

use kin_infer_core::backend::{create_compute, Act, CpuCompute, GpuCompute, Tensor};
use kin_infer_core::backend::{Positions, SeqSpan};
use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::quantize::quantize;
use kin_infer_core::nn::pooling::{Pooling, PoolingMode};
use kin_infer_core::nn::rope::Rotary;

/// The backend `KIN_INFER_BACKEND` names, asserted to be a GPU one (never a silent CPU run).
fn gpu() -> Box<dyn GpuCompute> {
    let want = std::env::var("KIN_INFER_BACKEND").unwrap_or_default();
    assert!(
        want == "wgpu" || want == "cuda",
        "these tests need KIN_INFER_BACKEND=wgpu or cuda (scripts/test-wgpu.sh)"
    );
    let be = create_compute(None).expect("the GPU backend (lavapipe in CI: mesa-vulkan-drivers)");
    assert_eq!(be.name(), want);
    be
}

/// Pseudo-random floats in (-2, 2).
fn rand(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        })
        .collect()
}

fn read(be: &dyn GpuCompute, t: &Tensor) -> Vec<f32> {
    let mut staging = Vec::new();
    let v = be.read(t.view(), &mut staging).to_vec();
    be.check().expect("no device failure");
    v
}

/// Runs `f` on both backends and compares its output.
fn both(what: &str, f: impl Fn(&dyn GpuCompute) -> Vec<f32>) {
    let g = gpu();
    let cpu = CpuCompute::new().unwrap();
    let want = f(&cpu);
    let got = f(g.as_ref());
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (a, b)) in got.iter().zip(&want).enumerate() {
        let tol = 2e-5 * b.abs().max(1.0);
        assert!(
            (a - b).abs() <= tol || (a.is_nan() && b.is_nan()),
            "{what}: element {i}: gpu {a} vs cpu {b}"
        );
    }
    // The device gives the same bits every run.
    assert_eq!(
        f(g.as_ref())
            .iter()
            .map(|v| v.to_bits())
            .collect::<Vec<_>>(),
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "{what}: two device runs differ"
    );
}

#[test]
fn linear_and_matmul() {
    let (rows, k, n) = (5, 37, 19);
    both("linear f32 + bias, two groups", |be| {
        let x = be.upload(rand(rows * k, 1));
        let w1 = rand(7 * k, 2);
        let w2 = rand((n - 7) * k, 3);
        let m = be.prepare_matrix(&[&w1, &w2], k);
        let bias = be.upload(rand(n, 4));
        let mut out = be.zeros(rows * n);
        be.linear(x.view(), rows, &m, Some(&bias), out.at_mut(..));
        read(be, &out)
    });
    both("matmul, strided", |be| {
        let (m, k, n) = (6, 11, 9);
        let a = be.upload(rand(m * 13, 5));
        let b = be.upload(rand(k * 10, 6));
        let mut out = be.zeros(m * n + 3);
        be.matmul(a.at(1..), 13, m, k, b.at(..), 10, n, out.at_mut(3..));
        read(be, &out)
    });
    for t in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        both(&format!("linear {t:?}"), |be| {
            let k = 256;
            let w = rand(8 * k, 7);
            let mut bytes = Vec::new();
            quantize(t, &w, &mut bytes);
            let m = be.prepare_matrix_quant(&[&bytes], k, t).unwrap();
            let x = be.upload(rand(3 * k, 8));
            let mut out = be.zeros(3 * 8);
            be.linear(x.view(), 3, &m, None, out.at_mut(..));
            let mut rows = be.zeros(2 * k);
            be.gather_matrix_rows(&m, &[5, 1], rows.at_mut(..));
            [read(be, &out), read(be, &rows)].concat()
        });
    }
}

#[test]
fn norms_activations_and_elementwise() {
    let (rows, w) = (4, 33);
    both("layer_norm", |be| {
        let mut x = be.upload(rand(rows * w, 9));
        let (g, b) = (be.upload(rand(w, 10)), be.upload(rand(w, 11)));
        be.layer_norm(x.at_mut(..), &g, &b, 1e-5);
        read(be, &x)
    });
    both("rms_norm", |be| {
        let x = be.upload(rand(rows * w, 12));
        let g = be.upload(rand(w, 13));
        let mut out = be.zeros(rows * w);
        be.rms_norm(x.view(), &g, 1e-6, out.at_mut(..));
        read(be, &out)
    });
    for act in [Act::Silu, Act::GeluErf, Act::GeluTanh, Act::Relu, Act::Tanh] {
        both(&format!("{act:?}"), |be| {
            let mut v = rand(1000, 14);
            v.extend([0.0, -0.0, 1e-8, -30.0, 30.0, 100.0, -100.0]);
            let mut x = be.upload(v);
            be.activation(x.at_mut(..), act);
            read(be, &x)
        });
        both(&format!("glu {act:?}"), |be| {
            let mut gu = be.upload(rand(rows * 2 * w, 15));
            let mut out = be.zeros(rows * w);
            be.glu(gu.at_mut(..), rows, w, act, out.at_mut(..));
            read(be, &out)
        });
    }
    both("mul, add, scale, softcap, row_axpy, divide_columns", |be| {
        let mut x = be.upload(rand(rows * w, 16));
        let y = be.upload(rand(rows * w, 17));
        be.mul(x.at_mut(..), y.view());
        be.add(x.at_mut(w..), y.at(..(rows - 1) * w));
        be.scale(x.at_mut(..), 1.7);
        be.softcap(x.at_mut(..), 3.0);
        let s = be.upload(rand(rows, 18));
        be.row_axpy(x.at_mut(..), w, s.view(), y.view());
        be.divide_columns(x.at_mut(..), w, 4, 9, 2.5);
        read(be, &x)
    });
    both("softmax, normalize, transpose, narrow, copy, write", |be| {
        let mut x = be.upload(rand(rows * w, 19));
        be.softmax(x.at_mut(..), w);
        let mut y = be.upload(rand(rows * w, 20));
        be.normalize(y.at_mut(..), w);
        let mut t = be.zeros(rows * w);
        be.transpose(y.view(), rows, w, t.at_mut(..));
        let mut n = be.zeros(rows * 5);
        be.narrow(x.view(), rows, w, 5, n.at_mut(..));
        let mut c = be.zeros(10);
        be.copy(t.at(3..13), c.at_mut(..));
        be.write(&[1.0, 2.0, 3.0], c.at_mut(4..7));
        [read(be, &x), read(be, &t), read(be, &n), read(be, &c)].concat()
    });
}

#[test]
fn gathers_rope_and_pooling() {
    both("gather, gather_add", |be| {
        let table = be.upload(rand(50 * 12, 21));
        let mut out = be.zeros(4 * 12);
        be.gather(&table, 12, &[3, 49, 0, 3], out.at_mut(..));
        be.gather_add(&table, 12, &[1, 2, 3, 4], out.at_mut(..));
        read(be, &out)
    });
    for interleaved in [false, true] {
        both(&format!("rope interleaved={interleaved}"), |be| {
            let rot = Rotary::new(6, 10_000.0, interleaved, 64);
            let (rows, stride, hd) = (5, 40, 8);
            let mut x = be.upload(rand(rows * stride, 22));
            let chunk = rot.chunk(3, rows);
            be.rope(
                x.at_mut(..),
                rows,
                stride,
                24,
                hd,
                Positions::From(3),
                &chunk,
            );
            let pos = [9u32, 0, 63, 5, 7];
            let chunk = rot.chunk(0, 64);
            be.rope(
                x.at_mut(..),
                rows,
                stride,
                16,
                hd,
                Positions::List(&pos),
                &chunk,
            );
            read(be, &x)
        });
    }
    both("pool, every mode", |be| {
        let h = 10;
        let x = be.upload(rand(9 * h, 23));
        let seqs = [SeqSpan { start: 0, len: 4 }, SeqSpan { start: 4, len: 5 }];
        let p = Pooling::new(vec![
            PoolingMode::Cls,
            PoolingMode::LastToken,
            PoolingMode::Max,
            PoolingMode::Mean,
            PoolingMode::MeanSqrtLen,
            PoolingMode::WeightedMean,
        ]);
        let mut out = be.zeros(2 * p.output_dim(h));
        be.pool(x.view(), &seqs, h, &p, out.at_mut(..));
        read(be, &out)
    });
}

#[cfg(feature = "wgpu")]
#[test]
fn a_device_failure_is_a_typed_error() {
    if std::env::var("KIN_INFER_BACKEND").as_deref() != Ok("wgpu") {
        return gpu_failure_skipped();
    }
    let g = kin_infer_core::backend::wgpu::WgpuCompute::new(true).unwrap();
    // A device-side failure (here: an op binding more than the device allows) is recorded,
    // reads return NaN, and `check` reports it.
    let too_big = (g.device_info().max_buffer_bytes / 4 + 16) as usize;
    if too_big.checked_mul(4).is_some_and(|b| b < (1 << 33)) {
        let mut t = g.zeros(too_big);
        g.scale(t.at_mut(..), 2.0);
        let mut staging = Vec::new();
        let v = g.read(t.at(..4), &mut staging).to_vec();
        let err = g.check().expect_err("an oversized buffer must fail");
        assert!(
            v.iter().all(|x| x.is_nan()),
            "a failed device reads NaN, not stale data"
        );
        assert!(err.to_string().contains("GPU device"), "{err}");
    }
}

#[cfg(feature = "wgpu")]
fn gpu_failure_skipped() {
    // Under CUDA an oversized allocation is the same path (recorded, NaN reads, `check`), but
    // exhausting a real GPU's memory in a test is not worth its time.
    eprintln!("SKIPPED: the oversized-binding failure is wgpu's");
}
