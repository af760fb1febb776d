//! The seam's operations on a GPU: each launches one or a few kernels (`wgsl.rs` documents
//! each one's parameters; `cuda_kernels.rs` mirrors them).
//! Weights reach the device through `upload.rs`.

use super::{dev, words, Device, DeviceMatrixPart, GpuBackend};
use crate::backend::{
    attention::ATTN_CHUNK, deberta, Act, AttnBias, AttnShape, DeviceMatrix, DisentangledTerms,
    GpuCompute, Inner, KvView, Positions, SeqSpan, Tensor, View, ViewMut,
};
use crate::error::Result;
use crate::kernels::{StoredRows, Tier};
use crate::op_args::pooling::{Pooling, PoolingMode};
use crate::op_args::rotary::RotaryChunk;

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("a tensor index past u32 on the GPU")
}

fn fbits(v: f32) -> u32 {
    v.to_bits()
}

fn act_code(a: Act) -> u32 {
    match a {
        Act::Silu => 0,
        Act::GeluErf => 1,
        Act::GeluTanh => 2,
        Act::Relu => 3,
        Act::Tanh => 4,
    }
}

/// The buffer and element offset of a view.
fn at<'a, D: Device>(v: &View<'a>) -> (&'a D::Buf, u32) {
    (D::buf(&dev(v.t).buf), u(v.start))
}

fn at_mut<'a, D: Device>(v: &'a ViewMut<'_>) -> (&'a D::Buf, u32) {
    (D::buf(&dev(v.t).buf), u(v.start))
}

fn whole<D: Device>(t: &Tensor) -> &D::Buf {
    D::buf(&dev(t).buf)
}

fn groups(m: &DeviceMatrix) -> &[DeviceMatrixPart] {
    match &m.inner {
        Inner::Device(g) => g,
        Inner::Cpu(_) => panic!("a CPU matrix given to a GPU backend"),
    }
}

impl<D: Device> GpuBackend<D> {
    fn dispatch(&self, op: &'static str, params: &[u32], bufs: &[&D::Buf], invocations: usize) {
        debug_assert!(
            params.len() <= super::MAX_PARAMS,
            "{op}: too many parameters"
        );
        self.dev.launch(op, params, bufs, invocations);
    }

    /// Rows `ids` of one part as f32 into `out` from element `oo`.
    fn gather_part(&self, part: &DeviceMatrixPart, k: usize, ids: &[u32], ob: &D::Buf, oo: u32) {
        let idb = self.dev.upload(ids);
        let wb = D::buf(&part.buf);
        if part.fmt == 0 {
            let p = [u(ids.len()), u(k), oo, 0];
            self.dispatch("gather", &p, &[wb, &idb, ob], ids.len() * k);
        } else {
            let p = [u(ids.len()), u(k), oo, part.fmt, u(part.row_bytes)];
            self.dispatch("gather_q", &p, &[wb, &idb, ob], ids.len() * k);
        }
    }

    /// `len` floats from element `so` of `src` to element `d` of `dst`.
    fn copy_words(&self, src: &D::Buf, so: u32, dst: &D::Buf, d: u32, len: usize) {
        let n = u(len);
        self.dispatch("copy2d", &[1, n, n, n, so, d, 0], &[src, dst], len);
    }

    /// Elementwise in place (`unary` shader).
    fn unary(&self, x: ViewMut, op: u32, s: f32) {
        let (b, o) = at_mut::<D>(&x);
        self.dispatch("unary", &[u(x.len), o, op, fbits(s)], &[b], x.len);
    }

    fn binary(&self, x: ViewMut, y: View, op: u32) {
        assert_eq!(x.len, y.len, "elementwise op: lengths differ");
        let (xb, xo) = at_mut::<D>(&x);
        let (yb, yo) = at::<D>(&y);
        self.dispatch("binary", &[u(x.len), xo, yo, op], &[xb, yb], x.len);
    }

    fn softmax_rows(&self, buf: &D::Buf, rows: usize, width: usize, offset: u32) {
        self.dispatch(
            "softmax",
            &[u(rows), u(width), offset, 0, 0, 0, 0],
            &[buf],
            rows,
        );
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
        self.dispatch(
            "copy2d",
            &[
                u(rows),
                u(cols),
                u(src_stride),
                u(dst_stride),
                xo,
                oo,
                transpose as u32,
            ],
            &[xb, ob],
            rows * cols,
        );
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
            let p = [
                u(rows),
                u(w.k),
                u(g.n),
                u(w.n),
                u(j0),
                xo,
                oo,
                bias.is_some() as u32,
                0,
            ];
            // One invocation per 4 × 4 output tile.
            let tiles = rows.div_ceil(4) * g.n.div_ceil(4);
            if g.fmt == 0 {
                self.dispatch("linear", &p, &[xb, D::buf(&g.buf), bb, ob], tiles);
            } else {
                let mut q = p.to_vec();
                q.extend([g.fmt, u(g.row_bytes)]);
                self.dispatch("linear_q", &q, &[xb, D::buf(&g.buf), bb, ob], tiles);
            }
            j0 += g.n;
        }
    }

    fn matmul(
        &self,
        a: View,
        lda: usize,
        m: usize,
        k: usize,
        b: View,
        ldb: usize,
        n: usize,
        out: ViewMut,
    ) {
        let (ab, ao) = at::<D>(&a);
        let (bb, bo) = at::<D>(&b);
        let (ob, oo) = at_mut::<D>(&out);
        let p = [u(m), u(k), u(n), u(lda), u(ldb), ao, bo, oo];
        self.dispatch("matmul", &p, &[ab, bb, ob], m * n);
    }

    fn layer_norm(&self, x: ViewMut, w: &Tensor, b: &Tensor, eps: f32) {
        let width = w.len();
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        let p = [u(rows), u(width), xo, fbits(eps)];
        self.dispatch("layer_norm", &p, &[xb, whole::<D>(w), whole::<D>(b)], rows);
    }

    fn rms_norm(&self, x: View, w: &Tensor, eps: f32, out: ViewMut) {
        let width = w.len();
        let rows = x.len / width;
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let p = [u(rows), u(width), xo, oo, fbits(eps)];
        self.dispatch("rms_norm", &p, &[xb, whole::<D>(w), ob], rows);
    }

    fn activation(&self, x: ViewMut, act: Act) {
        self.unary(x, act_code(act), 0.0);
    }

    fn glu(&self, gate_up: ViewMut, rows: usize, width: usize, act: Act, out: ViewMut) {
        let (gb, go) = at_mut::<D>(&gate_up);
        let (ob, oo) = at_mut::<D>(&out);
        let p = [u(rows), u(width), act_code(act), go, oo];
        self.dispatch("glu", &p, &[gb, ob], rows * width);
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
        let idb = self.dev.upload(ids);
        let (ob, oo) = at_mut::<D>(&out);
        let p = [u(ids.len()), u(width), oo, 0];
        self.dispatch(
            "gather",
            &p,
            &[whole::<D>(table), &idb, ob],
            ids.len() * width,
        );
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
        let idb = self.dev.upload(ids);
        let (ob, oo) = at_mut::<D>(&out);
        let p = [u(ids.len()), u(width), oo, 1];
        self.dispatch(
            "gather",
            &p,
            &[whole::<D>(table), &idb, ob],
            ids.len() * width,
        );
    }

    fn rope(
        &self,
        x: ViewMut,
        rows: usize,
        stride: usize,
        width: usize,
        head_dim: usize,
        pos: Positions,
        rotary: &RotaryChunk,
    ) {
        let dim = rotary.dim();
        let mut cs = Vec::with_capacity(rows * dim);
        for r in 0..rows {
            let p = match pos {
                Positions::From(start) => start + r,
                Positions::List(p) => p[r] as usize,
            };
            let (c, s) = rotary.cos_sin(p);
            cs.extend_from_slice(c);
            cs.extend_from_slice(s);
        }
        let csb = self.dev.upload(words(&cs));
        let (xb, xo) = at_mut::<D>(&x);
        let p = [
            u(rows),
            u(stride),
            u(width),
            u(head_dim),
            u(dim),
            rotary.interleaved() as u32,
            xo,
        ];
        let pairs = rows * (width / head_dim) * (dim / 2);
        self.dispatch("rope", &p, &[xb, &csb], pairs);
    }

    fn attention(
        &self,
        qkv: View,
        seqs: &[SeqSpan],
        heads: usize,
        head_dim: usize,
        scale: f32,
        bias: Option<&AttnBias>,
        out: ViewMut,
    ) {
        let (qb, qo) = at::<D>(&qkv);
        let (ob, oo) = at_mut::<D>(&out);
        let hidden = heads * head_dim;
        let longest = seqs.iter().map(|s| s.len).max().unwrap_or(0);
        let scores = self.dev.alloc(heads * longest * longest);
        let slopes;
        let (kind, bbuf, max_len, offsets) = match bias {
            None => (0, &self.dummy, 0, Vec::new()),
            Some(AttnBias::Relative { table, max_len }) => {
                (1, whole::<D>(table), *max_len, Vec::new())
            }
            Some(AttnBias::Alibi { slopes: s }) => {
                slopes = self.dev.upload(words(s));
                (2, &slopes, 0, Vec::new())
            }
            Some(AttnBias::Dense { bias }) => {
                (3, whole::<D>(bias), 0, deberta::dense_offsets(seqs, heads))
            }
        };
        for (si, s) in seqs.iter().enumerate() {
            let first = qo + u(s.start * 3 * hidden);
            let bo = offsets.get(si).copied().unwrap_or(0);
            let p = [
                u(s.len),
                u(heads),
                u(head_dim),
                first,
                fbits(scale),
                kind,
                u(max_len),
                u(bo),
            ];
            let n = heads * s.len * s.len;
            self.dispatch("attn_scores", &p, &[qb, bbuf, &scores], n);
            self.softmax_rows(&scores, heads * s.len, s.len, 0);
            let p = [
                u(s.len),
                u(heads),
                u(head_dim),
                first,
                oo + u(s.start * hidden),
            ];
            self.dispatch("attn_context", &p, &[qb, &scores, ob], s.len * hidden);
        }
    }

    fn kv_append(
        &self,
        qkv: View,
        q_dim: usize,
        kv_dim: usize,
        rows: usize,
        start: usize,
        keys: ViewMut,
        values: ViewMut,
    ) {
        let capacity = keys.len / kv_dim;
        let (qb, qo) = at::<D>(&qkv);
        let (kb, ko) = at_mut::<D>(&keys);
        let (vb, vo) = at_mut::<D>(&values);
        let p = [
            u(rows),
            u(q_dim),
            u(kv_dim),
            u(start),
            u(capacity),
            qo,
            ko,
            vo,
        ];
        self.dispatch("kv_append", &p, &[qb, kb, vb], rows * kv_dim);
    }

    fn causal_attention(
        &self,
        shape: &AttnShape,
        q: View,
        q_stride: usize,
        rows: usize,
        start: usize,
        kv: KvView,
        scores: ViewMut,
        out: ViewMut,
    ) {
        let AttnShape {
            heads,
            kv_heads,
            head_dim: hd,
            scale,
            window,
            softcap,
        } = *shape;
        let cap = kv.capacity;
        let (qb, qo) = at::<D>(&q);
        let (kb, ko) = at::<D>(&kv.keys);
        let (vb, vo) = at::<D>(&kv.values);
        let (sb, so) = at_mut::<D>(&scores);
        let (ob, oo) = at_mut::<D>(&out);
        let group = heads / kv_heads;
        let win = window.map_or(0, u);
        let mut c0 = 0;
        while c0 < rows {
            let cr = ATTN_CHUNK.min(rows - c0);
            let pos0 = start + c0;
            // Keys a row of this chunk reads at most (the last row's, or the window).
            let span = window.map_or(pos0 + cr, |w| w.min(pos0 + cr));
            let p = [
                u(cr),
                u(heads),
                u(hd),
                u(group),
                u(q_stride),
                qo + u(c0 * q_stride),
                ko,
                u(cap),
                u(pos0),
                win,
                fbits(scale),
                softcap.map_or(0, fbits),
                u(span),
                so,
            ];
            self.dispatch("causal_scores", &p, &[qb, kb, sb], cr * heads * span);
            let p = [u(cr * heads), u(cap), so, 1, u(heads), u(pos0), win];
            self.dispatch("softmax", &p, &[sb], cr * heads);
            let p = [
                u(cr),
                u(heads),
                u(hd),
                u(group),
                u(kv_heads * hd),
                vo,
                u(cap),
                u(pos0),
                win,
                so,
                oo + u(c0 * heads * hd),
            ];
            self.dispatch("causal_context", &p, &[sb, vb, ob], cr * heads * hd);
            c0 += cr;
        }
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
                let p = [
                    u(s.start),
                    u(s.len),
                    u(hidden),
                    mode,
                    xo,
                    oo + u(si * width + mi * hidden),
                ];
                self.dispatch("pool", &p, &[xb, ob], hidden);
            }
        }
    }

    fn normalize(&self, x: ViewMut, width: usize) {
        let rows = x.len / width;
        let (xb, xo) = at_mut::<D>(&x);
        self.dispatch("normalize", &[u(rows), u(width), xo], &[xb], rows);
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
        let p = [u(rows), u(width), xo, so, yo];
        self.dispatch("row_axpy", &p, &[xb, sb, yb], rows * width);
    }

    fn divide_columns(&self, x: ViewMut, stride: usize, from: usize, width: usize, s: f32) {
        let rows = x.len / stride;
        let (xb, xo) = at_mut::<D>(&x);
        let p = [u(rows), u(stride), u(from), u(width), xo, fbits(s)];
        self.dispatch("divide_columns", &p, &[xb], rows * width);
    }

    fn grouped_conv1d(
        &self,
        x: View,
        seqs: &[SeqSpan],
        channels: usize,
        kernel: usize,
        groups_w: &[DeviceMatrix],
        bias: &Tensor,
        out: ViewMut,
    ) {
        let (xb, xo) = at::<D>(&x);
        let (ob, oo) = at_mut::<D>(&out);
        let cg = channels / groups_w.len();
        let og = groups_w[0].n;
        let width = og * groups_w.len();
        for (g, w) in groups_w.iter().enumerate() {
            assert_eq!(
                (w.n, w.k),
                (og, kernel * cg),
                "grouped_conv1d: group weight shape"
            );
            let wb = D::buf(&groups(w)[0].buf);
            for s in seqs {
                let p = [
                    u(s.start),
                    u(s.len),
                    u(channels),
                    u(kernel),
                    u(cg),
                    u(og),
                    u(width),
                    u(g),
                    xo,
                    oo,
                ];
                self.dispatch("conv1d", &p, &[xb, wb, whole::<D>(bias), ob], s.len * og);
            }
        }
    }

    fn disentangled_bias(
        &self,
        qkv: View,
        seqs: &[SeqSpan],
        heads: usize,
        head_dim: usize,
        terms: &DisentangledTerms,
        out: ViewMut,
    ) {
        assert_eq!(
            terms.index.len(),
            2 * terms.max_len - 1,
            "disentangled_bias: index"
        );
        let (qb, qo) = at::<D>(&qkv);
        let (ob, oo) = at_mut::<D>(&out);
        let idx = self.dev.upload(terms.index);
        let pk = terms.pos_key.map_or(&self.dummy, |t| whole::<D>(t));
        let pq = terms.pos_query.map_or(&self.dummy, |t| whole::<D>(t));
        let offsets = deberta::dense_offsets(seqs, heads);
        for (s, off) in seqs.iter().zip(offsets) {
            assert!(
                s.len <= terms.max_len,
                "disentangled_bias: sequence too long"
            );
            let p = [
                u(s.start),
                u(s.len),
                u(heads),
                u(head_dim),
                u(terms.max_len),
                qo,
                oo + u(off),
                terms.pos_key.is_some() as u32,
                terms.pos_query.is_some() as u32,
                terms.divide_by.is_some() as u32,
                fbits(terms.divide_by.unwrap_or(1.0)),
            ];
            let n = heads * s.len * s.len;
            self.dispatch("disentangled", &p, &[qb, pk, pq, &idx, ob], n);
        }
    }
}
