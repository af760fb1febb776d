//! The seam's operations over sequences on a GPU: bidirectional and causal attention, the
//! KV cache, grouped convolution and DeBERTa's disentangled bias (`ops.rs` delegates to
//! these; each fills its kernels' parameter structs by name).

use super::params::*;
use super::{at, at_mut, groups, u, whole, words, Device, GpuBackend};
use crate::backend::{
    attention::ATTN_CHUNK, deberta, AttnBias, AttnShape, CausalAttn, DisentangledTerms,
    GroupedConv, QkvRows, SeqAttn, SeqSpan, View, ViewMut,
};

pub(super) fn attention<D: Device>(
    be: &GpuBackend<D>,
    qkv: View,
    seqs: &[SeqSpan],
    shape: &SeqAttn,
    out: ViewMut,
) {
    let SeqAttn {
        heads,
        head_dim,
        scale,
        bias,
    } = *shape;
    let (qb, qo) = at::<D>(&qkv);
    let (ob, oo) = at_mut::<D>(&out);
    let hidden = heads * head_dim;
    let longest = seqs.iter().map(|s| s.len).max().unwrap_or(0);
    let scores = be.dev.alloc(heads * longest * longest);
    let slopes;
    let (kind, bbuf, max_len, offsets) = match bias {
        None => (0, &be.dummy, 0, Vec::new()),
        Some(AttnBias::Relative { table, max_len }) => (1, whole::<D>(table), *max_len, Vec::new()),
        Some(AttnBias::Alibi { slopes: s }) => {
            slopes = be.dev.upload(words(s));
            (2, &slopes, 0, Vec::new())
        }
        Some(AttnBias::Dense { bias }) => {
            (3, whole::<D>(bias), 0, deberta::dense_offsets(seqs, heads))
        }
    };
    for (si, s) in seqs.iter().enumerate() {
        let first = qo + u(s.start * 3 * hidden);
        let bo = offsets.get(si).copied().unwrap_or(0);
        let (len, hd) = (u(s.len), u(head_dim));
        let p = AttnScores {
            len,
            heads: u(heads),
            hd,
            qo: first,
            scale,
            kind,
            max_len: u(max_len),
            bo: u(bo),
        };
        let n = heads * s.len * s.len;
        be.run(p, &[qb, bbuf, &scores], n);
        be.softmax_rows(&scores, heads * s.len, s.len, 0);
        let oo = oo + u(s.start * hidden);
        let p = AttnContext {
            len,
            heads: u(heads),
            hd,
            qo: first,
            oo,
        };
        be.run(p, &[qb, &scores, ob], s.len * hidden);
    }
}

pub(super) fn kv_append<D: Device>(be: &GpuBackend<D>, x: QkvRows, keys: ViewMut, values: ViewMut) {
    let capacity = keys.len / x.kv_dim;
    let (qb, qo) = at::<D>(&x.qkv);
    let (kb, ko) = at_mut::<D>(&keys);
    let (vb, vo) = at_mut::<D>(&values);
    let p = KvAppend {
        rows: u(x.rows),
        q_dim: u(x.q_dim),
        kv_dim: u(x.kv_dim),
        start: u(x.start),
        capacity: u(capacity),
        qo,
        ko,
        vo,
    };
    be.run(p, &[qb, kb, vb], x.rows * x.kv_dim);
}

pub(super) fn causal_attention<D: Device>(be: &GpuBackend<D>, shape: &AttnShape, a: CausalAttn) {
    let CausalAttn { x, kv, scores, out } = a;
    let (rows, start, q_stride) = (x.rows, x.start, x.stride());
    let (heads, kv_heads, hd, window) = (shape.heads, shape.kv_heads, shape.head_dim, shape.window);
    let cap = kv.capacity;
    let (qb, qo) = at::<D>(&x.qkv);
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
        let p = CausalScores {
            cr: u(cr),
            heads: u(heads),
            hd: u(hd),
            kv_group: u(group),
            q_stride: u(q_stride),
            qo: qo + u(c0 * q_stride),
            ko,
            capacity: u(cap),
            pos0: u(pos0),
            window: win,
            scale: shape.scale,
            // 0: no softcap (the kernel tests for it).
            softcap: shape.softcap.unwrap_or(0.0),
            span: u(span),
            so,
        };
        be.run(p, &[qb, kb, sb], cr * heads * span);
        let p = Softmax {
            rows: u(cr * heads),
            width: u(cap),
            xo: so,
            causal: 1,
            heads: u(heads),
            pos0: u(pos0),
            window: win,
        };
        be.run(p, &[sb], cr * heads);
        let p = CausalContext {
            cr: u(cr),
            heads: u(heads),
            hd: u(hd),
            kv_group: u(group),
            kv_dim: u(kv_heads * hd),
            vo,
            capacity: u(cap),
            pos0: u(pos0),
            window: win,
            so,
            oo: oo + u(c0 * heads * hd),
        };
        be.run(p, &[sb, vb, ob], cr * heads * hd);
        c0 += cr;
    }
}

pub(super) fn grouped_conv1d<D: Device>(
    be: &GpuBackend<D>,
    x: View,
    seqs: &[SeqSpan],
    conv: &GroupedConv,
    out: ViewMut,
) {
    let GroupedConv {
        channels,
        kernel,
        groups: groups_w,
        bias,
    } = *conv;
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
            let p = Conv1d {
                start: u(s.start),
                len: u(s.len),
                channels: u(channels),
                kernel: u(kernel),
                cg: u(cg),
                og: u(og),
                width: u(width),
                g: u(g),
                xo,
                oo,
            };
            be.run(p, &[xb, wb, whole::<D>(bias), ob], s.len * og);
        }
    }
}

pub(super) fn disentangled_bias<D: Device>(
    be: &GpuBackend<D>,
    qkv: View,
    seqs: &[SeqSpan],
    terms: &DisentangledTerms,
    out: ViewMut,
) {
    let (heads, head_dim) = (terms.heads, terms.head_dim);
    assert_eq!(
        terms.index.len(),
        2 * terms.max_len - 1,
        "disentangled_bias: index"
    );
    let (qb, qo) = at::<D>(&qkv);
    let (ob, oo) = at_mut::<D>(&out);
    let idx = be.dev.upload(terms.index);
    let pk = terms.pos_key.map_or(&be.dummy, |t| whole::<D>(t));
    let pq = terms.pos_query.map_or(&be.dummy, |t| whole::<D>(t));
    let offsets = deberta::dense_offsets(seqs, heads);
    for (s, off) in seqs.iter().zip(offsets) {
        assert!(
            s.len <= terms.max_len,
            "disentangled_bias: sequence too long"
        );
        let p = Disentangled {
            start: u(s.start),
            len: u(s.len),
            heads: u(heads),
            hd: u(head_dim),
            max_len: u(terms.max_len),
            qo,
            oo: oo + u(off),
            has_c2p: terms.pos_key.is_some() as u32,
            has_p2c: terms.pos_query.is_some() as u32,
            divide: terms.divide_by.is_some() as u32,
            divide_by: terms.divide_by.unwrap_or(1.0),
        };
        let n = heads * s.len * s.len;
        be.run(p, &[qb, pk, pq, &idx, ob], n);
    }
}
