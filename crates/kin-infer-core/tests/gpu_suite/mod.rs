//! The op suite shared by tests/gpu_ops.rs (a real GPU backend) and tests/cuda_emu.rs (the
//! CUDA kernels on the CPU): each op on the given backend against the CPU backend on the same
//! random data, within a relative 2e-5, and two device runs bit-identical.
#![allow(dead_code)]

use kin_infer_core::backend::{
    Act, CpuCompute, GpuCompute, GroupedConv, MatmulShape, Positions, RopeRows, SeqSpan, Tensor,
};
use kin_infer_core::kernels::ggml::GgmlType;
use kin_infer_core::kernels::ggml::{can_quantize, quantize};
use kin_infer_core::kernels::{StoredRows, WeightFormat};
use kin_infer_core::nn::pooling::{Pooling, PoolingMode};
use kin_infer_core::nn::rope::Rotary;

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

/// Runs `f` on the CPU and on `g` and compares its output.
fn both(g: &dyn GpuCompute, what: &str, f: impl Fn(&dyn GpuCompute) -> Vec<f32>) {
    let cpu = CpuCompute::new().unwrap();
    let want = f(&cpu);
    let got = f(g);
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
        f(g).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
        "{what}: two device runs differ"
    );
}

pub fn linear_and_matmul(g: &dyn GpuCompute) {
    let (rows, k, n) = (5, 37, 19);
    both(g, "linear f32 + bias, two groups", |be| {
        let x = be.upload(rand(rows * k, 1));
        let w1 = rand(7 * k, 2);
        let w2 = rand((n - 7) * k, 3);
        let m = be
            .prepare_weights(&[StoredRows::F32(&w1), StoredRows::F32(&w2)], k)
            .unwrap();
        let bias = be.upload(rand(n, 4));
        let mut out = be.zeros(rows * n);
        be.linear(x.view(), rows, &m, Some(&bias), out.at_mut(..));
        read(be, &out)
    });
    both(g, "matmul, strided", |be| {
        let (m, k, n) = (6, 11, 9);
        let a = be.upload(rand(m * 13, 5));
        let b = be.upload(rand(k * 10, 6));
        let mut out = be.zeros(m * n + 3);
        let shape = MatmulShape {
            m,
            k,
            n,
            lda: 13,
            ldb: 10,
        };
        be.matmul(a.at(1..), b.at(..), shape, out.at_mut(3..));
        read(be, &out)
    });
    // Every type with a reference quantizer (Q2_K and Q3_K have none).
    for t in GgmlType::ALL.into_iter().filter(|&t| can_quantize(t)) {
        both(g, &format!("linear {t:?}"), |be| {
            let k = 512; // two k-quant super-blocks (eight 32-blocks) per row
            let w = rand(8 * k, 7);
            let mut bytes = Vec::new();
            quantize(t, &w, &mut bytes);
            let rows = StoredRows::Blocks(WeightFormat::from_ggml(t), &bytes);
            let m = be.prepare_weights(&[rows], k).unwrap();
            let x = be.upload(rand(3 * k, 8));
            let mut out = be.zeros(3 * 8);
            be.linear(x.view(), 3, &m, None, out.at_mut(..));
            let mut rows = be.zeros(2 * k);
            be.gather_matrix_rows(&m, &[5, 1], rows.at_mut(..));
            [read(be, &out), read(be, &rows)].concat()
        });
    }
}

/// bf16 and f16 weights (kept as 16-bit patterns on a GPU): linear and row gathers.
pub fn half_weights(g: &dyn GpuCompute) {
    for format in [WeightFormat::Bf16, WeightFormat::F16] {
        both(g, &format!("linear {}", format.name()), |be| {
            let k = 37; // odd: every other row starts in the middle of a word
            let bits: Vec<u16> = rand(9 * k, 41)
                .iter()
                .map(|&v| match format {
                    WeightFormat::Bf16 => (v.to_bits() >> 16) as u16,
                    _ => half::f16::from_f32(v).to_bits(),
                })
                .collect();
            let parts = [
                StoredRows::Half(format, &bits[..4 * k]),
                StoredRows::Half(format, &bits[4 * k..]),
            ];
            let m = be.prepare_weights(&parts, k).unwrap();
            let x = be.upload(rand(3 * k, 42));
            let bias = be.upload(rand(9, 43));
            let mut out = be.zeros(3 * 9);
            be.linear(x.view(), 3, &m, Some(&bias), out.at_mut(..));
            let mut rows = be.zeros(3 * k);
            be.gather_matrix_rows(&m, &[8, 0, 3], rows.at_mut(..));
            [read(be, &out), read(be, &rows)].concat()
        });
    }
}

pub fn norms_activations_and_elementwise(g: &dyn GpuCompute) {
    let (rows, w) = (4, 33);
    both(g, "layer_norm", |be| {
        let mut x = be.upload(rand(rows * w, 9));
        let (g, b) = (be.upload(rand(w, 10)), be.upload(rand(w, 11)));
        be.layer_norm(x.at_mut(..), &g, &b, 1e-5);
        read(be, &x)
    });
    both(g, "rms_norm", |be| {
        let x = be.upload(rand(rows * w, 12));
        let g = be.upload(rand(w, 13));
        let mut out = be.zeros(rows * w);
        be.rms_norm(x.view(), &g, 1e-6, out.at_mut(..));
        read(be, &out)
    });
    for act in [Act::Silu, Act::GeluErf, Act::GeluTanh, Act::Relu, Act::Tanh] {
        both(g, &format!("{act:?}"), |be| {
            let mut v = rand(1000, 14);
            v.extend([0.0, -0.0, 1e-8, -30.0, 30.0, 100.0, -100.0]);
            let mut x = be.upload(v);
            be.activation(x.at_mut(..), act);
            read(be, &x)
        });
        both(g, &format!("glu {act:?}"), |be| {
            let mut gu = be.upload(rand(rows * 2 * w, 15));
            let mut out = be.zeros(rows * w);
            be.glu(gu.at_mut(..), rows, w, act, out.at_mut(..));
            read(be, &out)
        });
    }
    both(
        g,
        "mul, add, scale, softcap, row_axpy, divide_columns",
        |be| {
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
        },
    );
    both(
        g,
        "softmax, normalize, transpose, narrow, copy, write",
        |be| {
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
        },
    );
}

pub fn gathers_rope_and_pooling(g: &dyn GpuCompute) {
    both(g, "gather, gather_add", |be| {
        let table = be.upload(rand(50 * 12, 21));
        let mut out = be.zeros(4 * 12);
        be.gather(&table, 12, &[3, 49, 0, 3], out.at_mut(..));
        be.gather_add(&table, 12, &[1, 2, 3, 4], out.at_mut(..));
        read(be, &out)
    });
    for interleaved in [false, true] {
        both(g, &format!("rope interleaved={interleaved}"), |be| {
            let rot = Rotary::new(6, 10_000.0, interleaved, 64);
            let (rows, stride, hd) = (5, 40, 8);
            let mut x = be.upload(rand(rows * stride, 22));
            let chunk = rot.chunk(3, rows);
            let mut at = RopeRows {
                rows,
                stride,
                width: 24,
                head_dim: hd,
            };
            be.rope(x.at_mut(..), at, Positions::From(3), &chunk);
            let pos = [9u32, 0, 63, 5, 7];
            let chunk = rot.chunk(0, 64);
            at.width = 16;
            be.rope(x.at_mut(..), at, Positions::List(&pos), &chunk);
            read(be, &x)
        });
    }
    both(g, "pool, every mode", |be| {
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

/// Bidirectional attention with each bias kind, causal attention over a cache (GQA, a sliding
/// window, a softcap), a grouped convolution and DeBERTa's disentangled bias.
pub fn attention_and_convolution(g: &dyn GpuCompute) {
    use kin_infer_core::backend::{
        causal_scores_len, AttnBias, AttnShape, CausalAttn, DisentangledTerms, KvView, QkvRows,
        SeqAttn,
    };
    let (heads, hd) = (2, 4);
    let hidden = heads * hd;
    let seqs = [SeqSpan { start: 0, len: 3 }, SeqSpan { start: 3, len: 5 }];
    for kind in 0..4 {
        both(g, &format!("attention, bias kind {kind}"), |be| {
            let qkv = be.upload(rand(8 * 3 * hidden, 30));
            let table = be.upload(rand(heads * 9, 31));
            let dense = be.upload(rand(heads * (9 + 25), 32));
            let slopes = [0.5, 0.25];
            let bias = match kind {
                1 => Some(AttnBias::Relative {
                    table: &table,
                    max_len: 5,
                }),
                2 => Some(AttnBias::Alibi { slopes: &slopes }),
                3 => Some(AttnBias::Dense { bias: &dense }),
                _ => None,
            };
            let mut out = be.zeros(8 * hidden);
            let shape = SeqAttn {
                heads,
                head_dim: hd,
                scale: 0.5,
                bias: bias.as_ref(),
            };
            be.attention(qkv.view(), &seqs, &shape, out.at_mut(..));
            read(be, &out)
        });
    }
    for (window, softcap) in [(None, None), (Some(3), Some(5.0))] {
        both(
            g,
            &format!("causal attention {window:?} {softcap:?}"),
            |be| {
                let shape = AttnShape {
                    heads: 4,
                    kv_heads: 2,
                    head_dim: 4,
                    scale: 0.5,
                    window,
                    softcap,
                };
                let (q_dim, kv_dim, cap) = (16, 8, 24);
                let rows = 20; // more than one 16-row chunk
                let qkv = be.upload(rand(rows * (q_dim + 2 * kv_dim), 33));
                let mut keys = be.zeros(kv_dim * cap);
                let mut values = be.zeros(kv_dim * cap);
                let mut scores = be.zeros(causal_scores_len(4, cap));
                let mut out = be.zeros(rows * q_dim);
                // A prompt of 17, then 3 single steps.
                let stride = q_dim + 2 * kv_dim;
                for (start, n) in [(0, 17), (17, 1), (18, 1), (19, 1)] {
                    let x = QkvRows {
                        qkv: qkv.at(start * stride..(start + n) * stride),
                        q_dim,
                        kv_dim,
                        rows: n,
                        start,
                    };
                    be.kv_append(x, keys.at_mut(..), values.at_mut(..));
                    let kv = KvView {
                        keys: keys.view(),
                        values: values.view(),
                        capacity: cap,
                    };
                    let attn = CausalAttn {
                        x,
                        kv,
                        scores: scores.at_mut(..),
                        out: out.at_mut(start * q_dim..(start + n) * q_dim),
                    };
                    be.causal_attention(&shape, attn);
                }
                [read(be, &out), read(be, &keys), read(be, &values)].concat()
            },
        );
    }
    both(g, "grouped conv1d", |be| {
        let (channels, kernel, og) = (6, 3, 4);
        let x = be.upload(rand(8 * channels, 34));
        let w: Vec<_> = (0..2)
            .map(|i| {
                let w = rand(og * kernel * 3, 35 + i);
                be.prepare_weights(&[StoredRows::F32(&w)], kernel * 3)
                    .unwrap()
            })
            .collect();
        let bias = be.upload(rand(2 * og, 37));
        let mut out = be.zeros(8 * 2 * og);
        let conv = GroupedConv {
            channels,
            kernel,
            groups: &w,
            bias: &bias,
        };
        be.grouped_conv1d(x.view(), &seqs, &conv, out.at_mut(..));
        read(be, &out)
    });
    for divide in [None, Some(1.5)] {
        both(g, &format!("disentangled bias {divide:?}"), |be| {
            let qkv = be.upload(rand(8 * 3 * hidden, 38));
            let pk = be.upload(rand(7 * hidden, 39));
            let pq = be.upload(rand(7 * hidden, 40));
            // Clamped relative positions (monotonic, as DeBERTa's buckets are): rows 0..7.
            let index: Vec<u32> = (0..9)
                .map(|i: i32| ((i - 4).clamp(-3, 3) + 3) as u32)
                .collect();
            let terms = DisentangledTerms {
                heads,
                head_dim: hd,
                pos_key: Some(&pk),
                pos_query: Some(&pq),
                index: &index,
                max_len: 5,
                divide_by: divide,
            };
            let mut out = be.zeros(heads * (9 + 25));
            be.disentangled_bias(qkv.view(), &seqs, &terms, out.at_mut(..));
            read(be, &out)
        });
    }
}
