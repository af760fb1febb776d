"""An independent numpy implementation of the spec's graph (inmotion-artifact.md), written from
the spec text rather than from the PyTorch modules: it reads an artifact directory with only
numpy + the safetensors file format and computes logits. test_inmotion.py uses it to prove that
the PyTorch modules (hence the goldens) compute what the spec says, i.e. what a runtime that
follows the spec computes. float64 throughout (it is a cross-check, not a bit-exact one)."""

from __future__ import annotations

import json
import math
import os
import struct

import numpy as np

from . import quant

_DT = {"F32": np.float32, "F16": np.float16, "U8": np.uint8, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    n = struct.unpack("<Q", buf[:8])[0]
    header = json.loads(buf[8:8 + n])
    base = 8 + n
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        a, b = v["data_offsets"]
        raw = buf[base + a: base + b]
        if v["dtype"] == "BF16":
            u = np.frombuffer(raw, np.uint16).astype(np.uint32) << 16
            arr = u.view(np.float32)
        else:
            arr = np.frombuffer(raw, _DT[v["dtype"]])
        out[k] = (v["dtype"], arr.reshape(v["shape"]))
    return out


def load(art):
    with open(os.path.join(art, "meta.json")) as f:
        meta = json.load(f)
    st = read_safetensors(os.path.join(art, "model.safetensors"))
    q = meta["quantization"]
    W = {}
    qt = set(q.get("tensors", [])) if "bits" in q else set()
    for k, (dt, a) in st.items():
        if k.endswith("num_batches_tracked"):
            continue
        if k.endswith((".__q", ".__scale", ".__zero")):
            continue
        W[k] = a.astype(np.float64)
    for k in qt:
        codes = st[k + ".__q"][1]
        scale = st[k + ".__scale"][1]
        zero = st[k + ".__zero"][1]
        rows = codes.shape[0]
        cols = _logical_cols(k, meta, rows)
        u = quant.unpack_codes(codes, q["bits"], cols)
        w = quant.dequantize_matrix(u, scale, zero, q["granularity"], q.get("group_size") or 1)
        W[k] = w.astype(np.float64)
    return meta, W


def _logical_cols(name, meta, rows):
    hp = meta["hparams"]
    C, T = meta["in_channels"], meta["seq_len"]
    if name.endswith("tokenizer.proj.weight"):
        if meta["model"] == "lejepa":
            return C
        if meta["model"] == "cf_jepa":
            return T
        if meta["model"] == "ts_jepa":
            return C * hp["patch_size"]
    if meta["model"] == "sigreg":
        if name.startswith("encoder.conv"):
            return C * int(name[len("encoder.conv")])
        if name.startswith("encoder.blocks"):
            return hp["num_filters"] * 3
        if name == "latent_proj.weight":
            return hp["num_filters"]
        if name == "classifier.weight":
            return hp["latent_dim"]
    d = hp.get("d_model")
    if name.endswith("linear2.weight"):
        return hp["dim_feedforward"]
    if name == "head.3.weight":
        return hp["head_hidden"]
    return d


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def ln(x, w, b, eps):
    m = x.mean(-1, keepdims=True)
    v = ((x - m) ** 2).mean(-1, keepdims=True)
    return (x - m) / np.sqrt(v + eps) * w + b


def bn(x, W, p, eps):  # x [..., F] (channel last)
    return (x - W[p + "running_mean"]) / np.sqrt(W[p + "running_var"] + eps) * W[p + "weight"] + W[p + "bias"]


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


def lin(x, W, p):
    return x @ W[p + "weight"].T + W[p + "bias"]


def conv1d(x, w, b, stride=1, pad=0):  # x [Cin, T], w [Cout, Cin, k]
    Cin, T = x.shape
    Cout, _, k = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad)))
    Tout = (T + 2 * pad - k) // stride + 1
    out = np.empty((Cout, Tout))
    for t in range(Tout):
        seg = xp[:, t * stride: t * stride + k]
        out[:, t] = (w * seg[None]).sum(axis=(1, 2)) + b
    return out


def forward(meta, W, x):
    x = np.asarray(x, np.float64)
    fam = meta["model"]
    hp = meta["hparams"]
    eps_ln = hp.get("layer_norm_eps", 1e-5)
    eps_bn = hp.get("batch_norm_eps", 1e-5)
    T, C = meta["seq_len"], meta["in_channels"]
    if fam == "sigreg":
        xc = x.T
        F_ = hp["num_filters"]
        h = np.concatenate([conv1d(xc, W[f"encoder.conv{k}.weight"].reshape(-1, C, k), W[f"encoder.conv{k}.bias"], pad=k // 2)
                            for k in (3, 5, 7)], 0)
        h = gelu(bn(h.T, W, "encoder.bn.", eps_bn).T)
        for i in range(hp["num_blocks"]):
            p = f"encoder.blocks.{i}.block."
            y = conv1d(h, W[p + "0.weight"].reshape(F_, F_, 3), W[p + "0.bias"], pad=1)
            y = gelu(bn(y.T, W, p + "1.", eps_bn).T)
            y = conv1d(y, W[p + "3.weight"].reshape(F_, F_, 3), W[p + "3.bias"], pad=1)
            y = bn(y.T, W, p + "4.", eps_bn).T
            h = gelu(h + y)
        z = h.mean(1)
        z = ln(lin(z, W, "latent_proj."), W["latent_norm.weight"], W["latent_norm.bias"], eps_ln)
        return lin(z, W, "classifier.")
    d = hp["d_model"]
    n_reg = 0
    if fam == "lejepa":
        tok = lin(x, W, "encoder.tokenizer.proj.")
    elif fam == "cf_jepa":
        tok = lin(x.T, W, "encoder.tokenizer.proj.")
    elif fam == "ts_jepa":
        p = hp["patch_size"]
        tok = conv1d(x.T, W["encoder.tokenizer.proj.weight"].reshape(d, C, p), W["encoder.tokenizer.proj.bias"],
                     stride=p).T
    elif fam == "t_jepa":
        n_reg = hp["n_reg"]
        v = np.concatenate([np.ones(n_reg), x.reshape(-1)])
        z = np.zeros((n_reg, d))
        B = np.concatenate([z, W["encoder.tokenizer.bias"]])
        E = np.concatenate([z, W["encoder.tokenizer.feat_idx_embed.weight"]])
        tok = W["encoder.tokenizer.weight"] * v[:, None] + B + E
        tok = lin(tok, W, "encoder.input_proj.")
    if fam != "t_jepa":
        tok = tok + W["encoder.pos_embed"][0]
    h = tok
    H = hp["n_heads"]
    dh = d // H
    for i in range(hp["num_layers"]):
        p = f"encoder.transformer.layers.{i}."
        a = ln(h, W[p + "norm1.weight"], W[p + "norm1.bias"], eps_ln)
        qkv = a @ W[p + "self_attn.in_proj_weight"].T + W[p + "self_attn.in_proj_bias"]
        q, k, v = qkv[:, :d], qkv[:, d:2 * d], qkv[:, 2 * d:]
        outs = []
        for hh in range(H):
            s = slice(hh * dh, (hh + 1) * dh)
            att = softmax(q[:, s] @ k[:, s].T / math.sqrt(dh))
            outs.append(att @ v[:, s])
        h = h + lin(np.concatenate(outs, 1), W, p + "self_attn.out_proj.")
        f = ln(h, W[p + "norm2.weight"], W[p + "norm2.bias"], eps_ln)
        h = h + lin(gelu(lin(f, W, p + "linear1.")), W, p + "linear2.")
    h = ln(h, W["encoder.norm.weight"], W["encoder.norm.bias"], eps_ln)
    if fam == "lejepa":
        w = softmax(lin(h, W, "pool.attn.")[:, 0])
        pooled = (w[:, None] * h).sum(0)
    else:
        pooled = h[n_reg:].mean(0)
    y = gelu(lin(pooled, W, "head.0."))
    if fam in ("lejepa", "cf_jepa"):
        y = bn(y, W, "head.2.", eps_bn)
    return lin(y, W, "head.3.")


def check(art):
    """-> max |numpy-spec logits - golden expected| over the artifact's golden cases."""
    meta, W = load(art)
    with open(os.path.join(art, "golden.json")) as f:
        g = json.load(f)
    return max(float(np.abs(forward(meta, W, c["input"]) - np.array(c["expected"])).max()) for c in g["cases"])
