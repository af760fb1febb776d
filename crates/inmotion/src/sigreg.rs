//! sigreg: multi-scale Conv1d stem (k = 3, 5, 7, "same" padding) → BatchNorm → GELU →
//! residual blocks → global average pool → latent_proj → LayerNorm → classifier.
//!
//! Activations are time-major `[T, channels]`, the layout of the input window, so a Conv1d is
//! im2col (`col[t][ci*k + kk] = act[t + kk - k/2][ci]`, zero outside) followed by one GEMM
//! against the `[out, in*k]` weight, exactly the row-major flattening of `[out, in, k]`.

use crate::error::Result;
use crate::meta::{Meta, SigregHparams};
use crate::nn::{BatchNorm, Linear, Norm};
use crate::weights::Store;
use kin_infer::kernels::Kernels;

struct Conv {
    lin: Linear,
    cin: usize,
    k: usize,
}

impl Conv {
    fn load(
        kn: &Kernels,
        st: &Store,
        prefix: &str,
        out: usize,
        cin: usize,
        k: usize,
    ) -> Result<Conv> {
        Ok(Conv {
            lin: Linear::load(kn, st, prefix, &[out, cin, k])?,
            cin,
            k,
        })
    }

    /// `act` `[t, cin]` → `out` columns `[col0, col0 + self.out)` of a `[t, ldc]` buffer.
    fn run(
        &self,
        kn: &Kernels,
        act: &[f32],
        t: usize,
        col: &mut [f32],
        out: &mut [f32],
        ldc: usize,
    ) {
        let (cin, k) = (self.cin, self.k);
        let w = cin * k;
        let pad = k / 2;
        for ti in 0..t {
            let row = &mut col[ti * w..(ti + 1) * w];
            for kk in 0..k {
                let src = ti + kk;
                let valid = src >= pad && src - pad < t;
                for ci in 0..cin {
                    row[ci * k + kk] = if valid {
                        act[(src - pad) * cin + ci]
                    } else {
                        0.0
                    };
                }
            }
        }
        self.lin.run(kn, col, w, t, out, ldc);
    }
}

struct Block {
    conv0: Conv,
    bn1: BatchNorm,
    conv3: Conv,
    bn4: BatchNorm,
}

pub struct Sigreg {
    t: usize,
    f: usize,
    branches: [Conv; 3],
    bn: BatchNorm,
    blocks: Vec<Block>,
    latent: Linear,
    latent_norm: Norm,
    classifier: Linear,
    s: Scratch,
}

/// Run-state, allocated once (T = seq_len, F = num_filters).
struct Scratch {
    col: Vec<f32>,    // [T, max(C·7, F·3)] im2col
    act: Vec<f32>,    // [T, F]
    y: Vec<f32>,      // [T, F]
    y2: Vec<f32>,     // [T, F]
    pooled: Vec<f32>, // [F]
    lat: Vec<f32>,    // [latent_dim]
}

impl Sigreg {
    pub fn load(kn: &Kernels, st: &Store, meta: &Meta, h: &SigregHparams) -> Result<Self> {
        let (t, c, f) = (meta.seq_len, meta.in_channels, h.num_filters);
        let third = f / 3;
        let branches = [
            Conv::load(kn, st, "encoder.conv3", third, c, 3)?,
            Conv::load(kn, st, "encoder.conv5", third, c, 5)?,
            Conv::load(kn, st, "encoder.conv7", f - 2 * third, c, 7)?,
        ];
        let eps = h.batch_norm_eps;
        let bn = BatchNorm::load(st, "encoder.bn", f, eps)?;
        let blocks = (0..h.num_blocks)
            .map(|i| {
                let p = format!("encoder.blocks.{i}.block");
                Ok(Block {
                    conv0: Conv::load(kn, st, &format!("{p}.0"), f, f, 3)?,
                    bn1: BatchNorm::load(st, &format!("{p}.1"), f, eps)?,
                    conv3: Conv::load(kn, st, &format!("{p}.3"), f, f, 3)?,
                    bn4: BatchNorm::load(st, &format!("{p}.4"), f, eps)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ld = h.latent_dim;
        let latent = Linear::load(kn, st, "latent_proj", &[ld, f])?;
        let latent_norm = Norm::load(st, "latent_norm", ld, h.layer_norm_eps)?;
        let classifier = Linear::load(kn, st, "classifier", &[meta.num_classes, ld])?;
        let s = Scratch {
            col: vec![0.0; t * (c * 7).max(f * 3)],
            act: vec![0.0; t * f],
            y: vec![0.0; t * f],
            y2: vec![0.0; t * f],
            pooled: vec![0.0; f],
            lat: vec![0.0; ld],
        };
        Ok(Sigreg {
            t,
            f,
            branches,
            bn,
            blocks,
            latent,
            latent_norm,
            classifier,
            s,
        })
    }

    /// `x`: one window `[seq_len, in_channels]`; writes `logits`.
    pub fn forward(&mut self, kn: &Kernels, x: &[f32], logits: &mut [f32]) {
        let (t, f) = (self.t, self.f);
        let s = &mut self.s;
        // 1. three branches into channel ranges of act (order 3, 5, 7)
        let mut col0 = 0;
        for br in &self.branches {
            br.run(kn, x, t, &mut s.col, &mut s.act[col0..], f);
            col0 += br.lin.out;
        }
        // 2. BN + GELU
        self.bn.rows(&mut s.act);
        kn.gelu_erf(&mut s.act);
        // 3. residual blocks: GELU(x + BN(conv(GELU(BN(conv(x))))))
        for b in &self.blocks {
            b.conv0.run(kn, &s.act, t, &mut s.col, &mut s.y, f);
            b.bn1.rows(&mut s.y);
            kn.gelu_erf(&mut s.y);
            b.conv3.run(kn, &s.y, t, &mut s.col, &mut s.y2, f);
            b.bn4.rows(&mut s.y2);
            kn.add(&mut s.act, &s.y2);
            kn.gelu_erf(&mut s.act);
        }
        // 4. global average pool over time
        s.pooled.fill(0.0);
        for row in s.act.chunks_exact(f) {
            for (p, &v) in s.pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        for p in s.pooled.iter_mut() {
            *p /= t as f32;
        }
        // 5-6. latent, norm, classifier
        let ld = self.latent.out;
        self.latent.run(kn, &s.pooled, f, 1, &mut s.lat, ld);
        self.latent_norm.rows(kn, &mut s.lat);
        self.classifier
            .run(kn, &s.lat, ld, 1, logits, self.classifier.out);
    }
}
