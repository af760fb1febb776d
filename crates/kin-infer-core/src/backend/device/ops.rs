//! The seam's operations on a GPU: each launches one or a few kernels, filling each one's
//! parameter struct (`params.rs`) by name.
//! Weights reach the device through `upload.rs`.

use super::ops_seq as seq;
use super::params::*;
use super::{at, at_mut, groups, u, whole, words, Device, DeviceMatrixPart, GpuBackend};
use crate::backend::{
    Act, AttnShape, CausalAttn, DeviceMatrix, DisentangledTerms, GpuCompute, GroupedConv,
    MatmulShape, Positions, QkvRows, RopeRows, SeqAttn, SeqSpan, Tensor, View, ViewMut,
};
use crate::error::Result;
use crate::kernels::{StoredRows, Tier};
use crate::op_args::pooling::{Pooling, PoolingMode};
use crate::op_args::rotary::RotaryChunk;

fn act_code(a: Act) -> u32 {
    match a {
        Act::Silu => 0,
        Act::GeluErf => 1,
        Act::GeluTanh => 2,
        Act::Relu => 3,
        Act::Tanh => 4,
    }
}

impl<D: Device> GpuBackend<D> {
    /// Runs the kernel `p` describes with its parameters and `bufs` in the kernel's order.
    pub(super) fn run<P: Params>(&self, p: P, bufs: &[&D::Buf], invocations: usize) {
        self.dev.launch(P::OP, &p.words(), bufs, invocations);
    }

    /// Rows `ids` of the f32 table `tb` (`width` wide) into `ob` from element `oo`, written or
    /// (`add` = 1) added.
    fn gather_rows(&self, tb: &D::Buf, width: usize, ids: &[u32], ob: &D::Buf, oo: u32, add: u32) {
        let idb = self.dev.upload(ids);
        let p = Gather {
            rows: u(ids.len()),
            width: u(width),
            oo,
            add,
        };
        self.run(p, &[tb, &idb, ob], ids.len() * width);
    }

    /// Rows `ids` of one part as f32 into `out` from element `oo`.
    fn gather_part(&self, part: &DeviceMatrixPart, k: usize, ids: &[u32], ob: &D::Buf, oo: u32) {
        let wb = D::buf(&part.buf);
        if part.fmt == 0 {
            return self.gather_rows(wb, k, ids, ob, oo, 0);
        }
        let idb = self.dev.upload(ids);
        let p = GatherQ {
            rows: u(ids.len()),
            k: u(k),
            oo,
            fmt: part.fmt,
            row_bytes: u(part.row_bytes),
        };
        self.run(p, &[wb, &idb, ob], ids.len() * k);
    }

    /// `len` floats from element `so` of `src` to element `d` of `dst`.
    fn copy_words(&self, src: &D::Buf, so: u32, dst: &D::Buf, d: u32, len: usize) {
        let n = u(len);
        let p = Copy2d {
            rows: 1,
            cols: n,
            src_stride: n,
            dst_stride: n,
            xo: so,
            oo: d,
            transpose: 0,
        };
        self.run(p, &[src, dst], len);
    }

    /// Elementwise in place (`unary` shader).
    fn unary(&self, x: ViewMut, op: u32, s: f32) {
        let (b, o) = at_mut::<D>(&x);
        self.run(
            Unary {
                len: u(x.len),
                xo: o,
                op,
                s,
            },
            &[b],
            x.len,
        );
    }

    fn binary(&self, x: ViewMut, y: View, op: u32) {
        assert_eq!(x.len, y.len, "elementwise op: lengths differ");
        let (xb, xo) = at_mut::<D>(&x);
        let (yb, yo) = at::<D>(&y);
        self.run(
            Binary {
                len: u(x.len),
                xo,
                yo,
                op,
            },
            &[xb, yb],
            x.len,
        );
    }

    pub(super) fn softmax_rows(&self, buf: &D::Buf, rows: usize, width: usize, offset: u32) {
        let p = Softmax {
            rows: u(rows),
            width: u(width),
            xo: offset,
            causal: 0,
            heads: 0,
            pos0: 0,
            window: 0,
        };
        self.run(p, &[buf], rows);
    }

    #[allow(clippy::too_many_arguments)]
    fn copy2d(
        &self,
        x: View,
        rows: usize,
        cols: usize,
        src_stride: usize,
        dst_stride: usize,
        out: ViewMut,
        transpose: bool,
    ) {
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let p = Copy2d {
            rows: u(rows),
            cols: u(cols),
            src_stride: u(src_stride),
            dst_stride: u(dst_stride),
            xo,
            oo,
            transpose: transpose as u32,
        };
        self.run(p, &[xb, ob], rows * cols);
    }
}

impl<D: Device> GpuCompute for GpuBackend<D> {
    fn name(&self) -> &'static str {
        D::NAME
    }

    fn tier(&self) -> Tier {
        self.tier
    }

    fn device(&self) -> String {
        let i = self.dev.info();
        format!("{} ({}, {})", i.name, i.backend, i.kind)
    }

    fn check(&self) -> Result<()> {
        self.dev.status()
    }

    fn zeros(&self, len: usize) -> Tensor {
        self.tensor(self.dev.alloc(len), len)
    }

    fn upload(&self, data: Vec<f32>) -> Tensor {
        self.tensor(self.dev.upload(words(&data)), data.len())
    }

    fn read<'a>(&self, v: View<'a>, staging: &'a mut Vec<f32>) -> &'a [f32] {
        let (b, o) = at::<D>(&v);
        self.dev.download(b, o as usize, v.len, staging);
        staging
    }

    fn copy(&self, src: View, dst: ViewMut) {
        assert_eq!(src.len, dst.len, "copy: lengths differ");
        let (sb, so) = at::<D>(&src);
        let (db, d) = at_mut::<D>(&dst);
        self.copy_words(sb, so, db, d, src.len);
    }

    fn prepare_weights(&self, parts: &[StoredRows], k: usize) -> Result<DeviceMatrix> {
        self.prepare(parts, k)
    }

    fn linear(&self, x: View, rows: usize, w: &DeviceMatrix, bias: Option<&Tensor>, out: ViewMut) {
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let bb = bias.map_or(&self.dummy, |b| whole::<D>(b));
        let mut j0 = 0;
        for g in groups(w) {
            let p = Linear {
                rows: u(rows),
                k: u(w.k),
                gn: u(g.n),
                ntot: u(w.n),
                j0: u(j0),
                xo,
                oo,
                has_bias: bias.is_some() as u32,
                bo: 0,
            };
            // One invocation per 4 × 4 output tile.
            let tiles = rows.div_ceil(4) * g.n.div_ceil(4);
            let bufs = [xb, D::buf(&g.buf), bb, ob];
            if g.fmt == 0 {
                self.run(p, &bufs, tiles);
            } else {
                let q = p.stored(g.fmt, u(g.row_bytes));
                self.run(q, &bufs, tiles);
            }
            j0 += g.n;
        }
    }

    fn matmul(&self, a: View, b: View, s: MatmulShape, out: ViewMut) {
        let (ab, ao) = at::<D>(&a);
        let (bb, bo) = at::<D>(&b);
        let (ob, oo) = at_mut::<D>(&out);
        let p = Matmul {
            m: u(s.m),
            k: u(s.k),
            n: u(s.n),
            lda: u(s.lda),
            ldb: u(s.ldb),
            ao,
            bo,
            oo,
        };
        self.run(p, &[ab, bb, ob], s.m * s.n);
    }

    fn layer_norm(&self, x: ViewMut, w: &Tensor, b: &Tensor, eps: f32) {
        let width = w.len();
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        let p = LayerNorm {
            rows: u(rows),
            width: u(width),
            xo,
            eps,
        };
        self.run(p, &[xb, whole::<D>(w), whole::<D>(b)], rows);
    }

    fn rms_norm(&self, x: View, w: &Tensor, eps: f32, out: ViewMut) {
        let width = w.len();
        let rows = x.len / width;
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let p = RmsNorm {
            rows: u(rows),
            width: u(width),
            xo,
            oo,
            eps,
        };
        self.run(p, &[xb, whole::<D>(w), ob], rows);
    }

    fn activation(&self, x: ViewMut, act: Act) {
        self.unary(x, act_code(act), 0.0);
    }

    fn glu(&self, gate_up: ViewMut, rows: usize, width: usize, act: Act, out: ViewMut) {
        let (gb, go) = at_mut::<D>(&gate_up);
        let (ob, oo) = at_mut::<D>(&out);
        let p = Glu {
            rows: u(rows),
            width: u(width),
            act: act_code(act),
            go,
            oo,
        };
        self.run(p, &[gb, ob], rows * width);
    }

    fn mul(&self, x: ViewMut, y: View) {
        self.binary(x, y, 1);
    }

    fn add(&self, x: ViewMut, y: View) {
        self.binary(x, y, 0);
    }

    fn scale(&self, x: ViewMut, s: f32) {
        self.unary(x, 5, s);
    }

    fn softcap(&self, x: ViewMut, cap: f32) {
        self.unary(x, 6, cap);
    }

    fn gather(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut) {
        let (ob, oo) = at_mut::<D>(&out);
        self.gather_rows(whole::<D>(table), width, ids, ob, oo, 0);
    }

    fn gather_matrix_rows(&self, m: &DeviceMatrix, ids: &[u32], out: ViewMut) {
        let (ob, oo) = at_mut::<D>(&out);
        let k = m.k;
        let parts = groups(m);
        if let [one] = parts {
            // A token embedding table is one part: one gather over its rows.
            self.gather_part(one, k, ids, ob, oo);
            return;
        }
        for (r, &id) in ids.iter().enumerate() {
            // The column group holding output `id`: its row is the torch weight's row.
            let mut j = id as usize;
            for g in parts {
                if j < g.n {
                    self.gather_part(g, k, &[u(j)], ob, oo + u(r * k));
                    break;
                }
                j -= g.n;
            }
        }
    }

    fn gather_add(&self, table: &Tensor, width: usize, ids: &[u32], out: ViewMut) {
        let (ob, oo) = at_mut::<D>(&out);
        self.gather_rows(whole::<D>(table), width, ids, ob, oo, 1);
    }

    fn rope(&self, x: ViewMut, at: RopeRows, pos: Positions, rotary: &RotaryChunk) {
        let RopeRows {
            rows,
            stride,
            width,
            head_dim,
        } = at;
        let dim = rotary.dim();
        let mut cs = Vec::with_capacity(rows * dim);
        for r in 0..rows {
            let (c, s) = rotary.cos_sin(pos.at(r));
            cs.extend_from_slice(c);
            cs.extend_from_slice(s);
        }
        let csb = self.dev.upload(words(&cs));
        let (xb, xo) = at_mut::<D>(&x);
        let p = Rope {
            rows: u(rows),
            stride: u(stride),
            width: u(width),
            head_dim: u(head_dim),
            dim: u(dim),
            interleaved: rotary.interleaved() as u32,
            xo,
        };
        let pairs = rows * (width / head_dim) * (dim / 2);
        self.run(p, &[xb, &csb], pairs);
    }

    fn attention(&self, qkv: View, seqs: &[SeqSpan], shape: &SeqAttn, out: ViewMut) {
        seq::attention(self, qkv, seqs, shape, out)
    }

    fn kv_append(&self, x: QkvRows, keys: ViewMut, values: ViewMut) {
        seq::kv_append(self, x, keys, values)
    }

    fn causal_attention(&self, shape: &AttnShape, a: CausalAttn) {
        seq::causal_attention(self, shape, a)
    }

    fn pool(&self, x: View, seqs: &[SeqSpan], hidden: usize, pooling: &Pooling, out: ViewMut) {
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let width = pooling.output_dim(hidden);
        for (si, s) in seqs.iter().enumerate() {
            for (mi, m) in pooling.modes().iter().enumerate() {
                let mode = match m {
                    PoolingMode::Cls => 0,
                    PoolingMode::LastToken => 1,
                    PoolingMode::Max => 2,
                    PoolingMode::Mean => 3,
                    PoolingMode::MeanSqrtLen => 4,
                    PoolingMode::WeightedMean => 5,
                };
                let p = Pool {
                    start: u(s.start),
                    len: u(s.len),
                    hidden: u(hidden),
                    mode,
                    xo,
                    oo: oo + u(si * width + mi * hidden),
                };
                self.run(p, &[xb, ob], hidden);
            }
        }
    }

    fn normalize(&self, x: ViewMut, width: usize) {
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        let p = Normalize {
            rows: u(rows),
            width: u(width),
            xo,
        };
        self.run(p, &[xb], rows);
    }

    fn narrow(&self, x: View, rows: usize, width: usize, keep: usize, out: ViewMut) {
        self.copy2d(x, rows, keep, width, keep, out, false);
    }

    fn write(&self, src: &[f32], dst: ViewMut) {
        assert_eq!(src.len(), dst.len, "write: lengths differ");
        if src.is_empty() {
            return;
        }
        // Staged in a new buffer and copied by a kernel, in order with the ops before it.
        let staged = self.dev.upload(words(src));
        let (db, d) = at_mut::<D>(&dst);
        self.copy_words(&staged, 0, db, d, src.len());
    }

    fn transpose(&self, x: View, rows: usize, cols: usize, out: ViewMut) {
        self.copy2d(x, rows, cols, cols, rows, out, true);
    }

    fn softmax(&self, x: ViewMut, width: usize) {
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        self.softmax_rows(xb, rows, width, xo);
    }

    fn row_axpy(&self, x: ViewMut, width: usize, s: View, y: View) {
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        let (sb, so) = at::<D>(&s);
        let (yb, yo) = at::<D>(&y);
        let p = RowAxpy {
            rows: u(rows),
            width: u(width),
            xo,
            so,
            yo,
        };
        self.run(p, &[xb, sb, yb], rows * width);
    }

    fn divide_columns(&self, x: ViewMut, stride: usize, from: usize, width: usize, s: f32) {
        let rows = x.len / stride;
        let (xb, xo) = at_mut::<D>(&x);
        let p = DivideColumns {
            rows: u(rows),
            stride: u(stride),
            col0: u(from),
            width: u(width),
            xo,
            s,
        };
        self.run(p, &[xb], rows * width);
    }

    fn grouped_conv1d(&self, x: View, seqs: &[SeqSpan], conv: &GroupedConv, out: ViewMut) {
        seq::grouped_conv1d(self, x, seqs, conv, out)
    }

    fn disentangled_bias(&self, qkv: View, seqs: &[SeqSpan], t: &DisentangledTerms, out: ViewMut) {
        seq::disentangled_bias(self, qkv, seqs, t, out)
    }
}
