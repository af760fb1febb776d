//! sigreg: multi-scale Conv1d stem (k = 3, 5, 7, "same" padding) → BatchNorm → GELU →
//! residual blocks → global average pool → latent_proj → LayerNorm → classifier, every step a
//! backend op.
//!
//! Activations are time-major `[T, channels]`, the layout of the input window, so each Conv1d
//! is the backend's `grouped_conv1d` (one group) with its weight's columns reordered
//! `(tap, channel)`. Load-time rewrites that leave the function unchanged (rounding aside;
//! see transformer.rs): the three stem branches are one k = 7 convolution whose k = 3 and
//! k = 5 rows have zero outer taps (a zero tap adds exactly 0), and every BatchNorm is folded
//! into the convolution before it.

use crate::error::Result;
use crate::meta::{Meta, SigregHparams};
use crate::nn::{linear, load_host, load_linear, load_norm, BatchNorm};
use crate::weights::Store;
use kin_infer_core::backend::{Act, Backend, DeviceMatrix, GroupedConv, SeqSpan, Tensor};
use kin_infer_core::nn::{LayerNorm, Linear};
use kin_infer_core::{Pooling, PoolingMode};

/// A "same"-padded Conv1d of `kernel` taps over `cin` channels, on the backend.
struct Conv {
    w: DeviceMatrix,
    b: Tensor,
    cin: usize,
    kernel: usize,
}

impl Conv {
    /// Rows `[out, cin, k]` of `w` placed, centred, into a `kernel`-tap (tap, channel) layout.
    fn place(w: &[f32], cin: usize, k: usize, kernel: usize, dst: &mut [f32]) {
        let off = (kernel - k) / 2;
        for (o, row) in w.chunks_exact(cin * k).enumerate() {
            for ci in 0..cin {
                for tap in 0..k {
                    dst[o * kernel * cin + (tap + off) * cin + ci] = row[ci * k + tap];
                }
            }
        }
    }

    fn new(be: &dyn Backend, w: &[f32], b: Vec<f32>, cin: usize, kernel: usize) -> Conv {
        Conv {
            w: crate::nn::f32_matrix(be, w, kernel * cin),
            b: be.upload(b),
            cin,
            kernel,
        }
    }

    /// `{prefix}` `[out, cin, k]` with the BatchNorm after it folded in.
    fn load(
        be: &dyn Backend,
        st: &Store,
        prefix: &str,
        shape: [usize; 3],
        bn: &BatchNorm,
    ) -> Result<Conv> {
        let [out, cin, k] = shape;
        let (w, mut b) = load_host(st, prefix, &shape)?;
        let mut wr = vec![0.0f32; out * cin * k];
        Conv::place(&w, cin, k, k, &mut wr);
        bn.fold_after(&mut wr, &mut b);
        Ok(Conv::new(be, &wr, b, cin, k))
    }

    fn run(&self, be: &dyn Backend, seq: &[SeqSpan], x: &Tensor, out: &mut Tensor) {
        let conv = GroupedConv {
            channels: self.cin,
            kernel: self.kernel,
            groups: std::slice::from_ref(&self.w),
            bias: &self.b,
        };
        be.grouped_conv1d(x.view(), seq, &conv, out.at_mut(..));
    }
}

struct Block {
    conv0: Conv,
    conv3: Conv,
}

pub struct Sigreg {
    t: usize,
    f: usize,
    stem: Conv,
    blocks: Vec<Block>,
    pooling: Pooling,
    latent: Linear,
    latent_norm: LayerNorm,
    classifier: Linear,
    s: Scratch,
}

/// Run-state, allocated once (T = seq_len, F = num_filters).
struct Scratch {
    input: Tensor,  // [T, C]
    act: Tensor,    // [T, F]
    y: Tensor,      // [T, F]
    y2: Tensor,     // [T, F]
    pooled: Tensor, // [F]
    lat: Tensor,    // [latent_dim]
}

impl Sigreg {
    pub fn load(be: &dyn Backend, st: &Store, meta: &Meta, h: &SigregHparams) -> Result<Self> {
        let (t, c, f) = (meta.seq_len, meta.in_channels, h.num_filters);
        let third = f / 3;
        let eps = h.batch_norm_eps;
        // The stem: branches 3, 5, 7 into output channels in that order, one k = 7 weight.
        let mut w = vec![0.0f32; f * 7 * c];
        let mut b = Vec::with_capacity(f);
        let mut row0 = 0;
        for (k, out) in [(3, third), (5, third), (7, f - 2 * third)] {
            let (wb, bb) = load_host(st, &format!("encoder.conv{k}"), &[out, c, k])?;
            Conv::place(&wb, c, k, 7, &mut w[row0 * 7 * c..(row0 + out) * 7 * c]);
            b.extend_from_slice(&bb);
            row0 += out;
        }
        BatchNorm::load(st, "encoder.bn", f, eps)?.fold_after(&mut w, &mut b);
        let stem = Conv::new(be, &w, b, c, 7);
        let blocks = (0..h.num_blocks)
            .map(|i| {
                let p = format!("encoder.blocks.{i}.block");
                let bn1 = BatchNorm::load(st, &format!("{p}.1"), f, eps)?;
                let bn4 = BatchNorm::load(st, &format!("{p}.4"), f, eps)?;
                Ok(Block {
                    conv0: Conv::load(be, st, &format!("{p}.0"), [f, f, 3], &bn1)?,
                    conv3: Conv::load(be, st, &format!("{p}.3"), [f, f, 3], &bn4)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let ld = h.latent_dim;
        let latent = load_linear(be, st, "latent_proj", &[ld, f])?;
        let latent_norm = load_norm(be, st, "latent_norm", ld, h.layer_norm_eps)?;
        let (wc, bc) = load_host(st, "classifier", &[meta.num_classes, ld])?;
        let classifier = linear(be, &wc, bc, ld);
        let s = Scratch {
            input: be.zeros(t * c),
            act: be.zeros(t * f),
            y: be.zeros(t * f),
            y2: be.zeros(t * f),
            pooled: be.zeros(f),
            lat: be.zeros(ld),
        };
        Ok(Sigreg {
            t,
            f,
            stem,
            blocks,
            pooling: Pooling::new(vec![PoolingMode::Mean]),
            latent,
            latent_norm,
            classifier,
            s,
        })
    }

    /// `x`: one window `[seq_len, in_channels]`; writes `logits`.
    pub fn forward(&mut self, be: &dyn Backend, x: &[f32], logits: &mut Tensor) {
        let s = &mut self.s;
        let seq = [SeqSpan {
            start: 0,
            len: self.t,
        }];
        be.write(x, s.input.at_mut(..));
        // 1-2. the stem, its BatchNorm folded in, then GELU
        self.stem.run(be, &seq, &s.input, &mut s.act);
        be.activation(s.act.at_mut(..), Act::GeluErf);
        // 3. residual blocks: GELU(x + BN(conv(GELU(BN(conv(x))))))
        for b in &self.blocks {
            b.conv0.run(be, &seq, &s.act, &mut s.y);
            be.activation(s.y.at_mut(..), Act::GeluErf);
            b.conv3.run(be, &seq, &s.y, &mut s.y2);
            be.add(s.act.at_mut(..), s.y2.view());
            be.activation(s.act.at_mut(..), Act::GeluErf);
        }
        // 4. global average pool over time
        be.pool(
            s.act.view(),
            &seq,
            self.f,
            &self.pooling,
            s.pooled.at_mut(..),
        );
        // 5-6. latent, norm, classifier
        self.latent
            .forward(be, s.pooled.view(), 1, s.lat.at_mut(..));
        self.latent_norm.forward(be, s.lat.at_mut(..));
        self.classifier
            .forward(be, s.lat.view(), 1, logits.at_mut(..));
    }
}
