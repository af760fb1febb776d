#!/usr/bin/env python3
"""Regenerate the nomic-bert and JinaBERT (ALiBi) fixtures under tests/fixtures/ and their goldens.

    python python/gen_fixtures_nomic_jina.py                 # all four, into tests/fixtures/
    python python/gen_fixtures_nomic_jina.py --out /tmp/fx   # elsewhere
    python python/gen_fixtures_nomic_jina.py --only jina_tiny

Conventions are those of python/gen_fixtures.py (fixed seeds, byte-identical reruns, float32,
eager attention, one right-padded batch per `hidden` case, `embedding` cases from
sentence-transformers' own Pooling/Normalize modules). Fixtures:

- `nomic_tiny`: nomic-bert in the layout transformers 5.x writes (`NomicBertModel`,
  `layers.N.self_attn.q_proj`, `rope_parameters`); reference = transformers itself, embeddings =
  `SentenceTransformer(dir)`. Also `matryoshka.json`: truncated (+renormalized) embeddings.
- `nomic_orig`: nomic-bert in the layout of the published nomic-embed-text checkpoints (`n_embd`,
  `encoder.layers.N.attn.Wqkv`, `mlp.fc11/fc12/fc2`, `norm1/norm2`, `emb_ln`), with other sizes,
  partial rotary (`rotary_emb_fraction` 0.5), base 10000 and every optional bias on. transformers
  cannot express partial rotary or the biases, so the reference is `NomicReference` below,
  written from the published architecture (contrastors / `modeling_hf_nomic_bert.py`) and
  checked against transformers' `NomicBertModel` on the configuration both can express.
- `jina_tiny`, `jina_odd`: JinaBERT v2 layout (`model_type: bert`, `position_embedding_type:
  alibi`, `mlp.gated_layers/wo/layernorm`), reference = python/jina_reference.py. `jina_odd` has
  5 heads (ALiBi slopes interpolated for a non-power-of-two count), ReGLU, a `bert.` prefix.
"""

from __future__ import annotations

import math
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fixture_common as fc  # noqa: E402
from fixture_common import BERT_SPECIAL, TOL  # noqa: E402
from golden_json import f32_list  # noqa: E402

SCRIPT = "python/gen_fixtures_nomic_jina.py"
MATRYOSHKA_DIMS = [8, 16, 24]

def sizes(vocab, hidden, layers, heads, inter, max_pos):
    """The BERT-layout size keys (type vocabulary 2), in the order the configs write them."""
    return dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                intermediate_size=inter, max_position_embeddings=max_pos, type_vocab_size=2)


def fixture(name, kind, seed, config, prefix, pooling, normalize, max_seq_length):
    return dict(name=name, kind=kind, seed=seed, config=config, prefix=prefix, pooling=pooling,
                normalize=normalize, max_seq_length=max_seq_length)


# nomic_orig: the published nomic-embed-text config keys (original contrastors layout), other
# sizes than nomic_tiny.
NOMIC_ORIG_CONFIG = {
    "activation_function": "swiglu",
    "architectures": ["NomicBertModel"],
    "attn_pdrop": 0.0,
    "bos_token_id": None,
    "causal": False,
    "dense_seq_output": True,
    "embd_pdrop": 0.0,
    "eos_token_id": None,
    "fused_bias_fc": True,
    "fused_dropout_add_ln": True,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-5,
    "max_trained_positions": 48,
    "mlp_fc1_bias": True,
    "mlp_fc2_bias": True,
    "model_type": "nomic_bert",
    "n_embd": 40,
    "n_head": 5,
    "n_inner": 56,
    "n_layer": 3,
    "n_positions": 48,
    "pad_vocab_size_multiple": 1,
    "parallel_block": False,
    "parallel_block_tied_norm": False,
    "prenorm": False,
    "qkv_proj_bias": True,
    "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.0,
    "rotary_emb_base": 10000,
    "rotary_emb_fraction": 0.5,
    "rotary_emb_interleaved": False,
    "rotary_emb_scale_base": None,
    "rotary_scaling_factor": None,
    "scale_attn_by_inverse_layer_idx": False,
    "scale_attn_weights": True,
    "summary_activation": None,
    "summary_first_dropout": 0.0,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "torch_dtype": "float32",
    "transformers_version": "4.34.0",
    "type_vocab_size": 2,
    "use_cache": True,
    "use_flash_attn": True,
    "use_rms_norm": False,
    "use_xentropy": True,
    "vocab_size": 96,
}

FIXTURES = [
    fixture("nomic_tiny", "nomic_hf", 2001,
            dict(sizes(100, 48, 2, 4, 72, 64), hidden_act="silu", layer_norm_eps=1e-12, pad_token_id=0,
                 rope_parameters={"rope_type": "default", "rope_theta": 1000.0}),
            "", ["mean"], True, 64),
    fixture("nomic_orig", "nomic_orig", 2002, NOMIC_ORIG_CONFIG, "", ["mean"], False, 48),
    fixture("jina_tiny", "jina", 2003,
            dict(sizes(100, 48, 2, 4, 64, 64), layer_norm_eps=1e-12, pad_token_id=0, feed_forward_type="geglu"),
            "", ["mean"], True, 64),
    fixture("jina_odd", "jina", 2004,
            dict(sizes(90, 40, 3, 5, 56, 48), layer_norm_eps=1e-5, pad_token_id=0, feed_forward_type="reglu"),
            "bert.", ["cls"], False, 48),
]


# --------------------------------------------------------------------------------------------
# nomic-bert reference, original (contrastors) layout
# --------------------------------------------------------------------------------------------

def _nomic_rotary(x, cos, sin, interleaved):
    """Rotary on the first `2 * cos.shape[-1]` features of each head (x: [b, s, h, d])."""
    import torch
    ro = cos.shape[-1] * 2
    xr, rest = x[..., :ro], x[..., ro:]
    c = cos[None, :, None, :]
    s = sin[None, :, None, :]
    if interleaved:
        x1, x2 = xr[..., 0::2], xr[..., 1::2]
        out = torch.stack((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1).flatten(-2)
    else:
        x1, x2 = xr[..., : ro // 2], xr[..., ro // 2:]
        c2 = torch.cat((c, c), dim=-1)
        s2 = torch.cat((s, s), dim=-1)
        out = xr * c2 + torch.cat((-x2, x1), dim=-1) * s2
    return torch.cat((out, rest), dim=-1)


class NomicReference:
    """nomic-bert forward over an original-layout state dict (post-norm, SwiGLU, fused Wqkv,
    rotary on `rotary_emb_fraction` of each head, optional biases)."""

    def __init__(self, cfg, sd):
        self.c = cfg
        self.sd = sd

    def lin(self, x, name):
        import torch.nn.functional as F
        return F.linear(x, self.sd[name + ".weight"], self.sd.get(name + ".bias"))

    def ln(self, x, name):
        import torch.nn.functional as F
        return F.layer_norm(x, (x.shape[-1],), self.sd[name + ".weight"], self.sd[name + ".bias"],
                            self.c["layer_norm_epsilon"])

    def __call__(self, ids, mask, types):
        import torch
        import torch.nn.functional as F
        c, sd = self.c, self.sd
        h, nh = c["n_embd"], c["n_head"]
        hd = h // nh
        b, s = ids.shape
        x = F.embedding(ids, sd["embeddings.word_embeddings.weight"])
        x = x + F.embedding(types, sd["embeddings.token_type_embeddings.weight"])
        x = self.ln(x, "emb_ln")
        ro = int(hd * c["rotary_emb_fraction"])
        inv_freq = 1.0 / (c["rotary_emb_base"] ** (torch.arange(0, ro, 2, dtype=torch.float32) / ro))
        t = torch.arange(s, dtype=torch.float32)
        freqs = torch.outer(t, inv_freq)
        cos, sin = torch.cos(freqs), torch.sin(freqs)
        ext = (1.0 - mask[:, None, None, :].to(torch.float32)) * torch.finfo(torch.float32).min
        for i in range(c["n_layer"]):
            p = f"encoder.layers.{i}"
            qkv = self.lin(x, f"{p}.attn.Wqkv").view(b, s, 3, nh, hd)
            q = _nomic_rotary(qkv[:, :, 0], cos, sin, c["rotary_emb_interleaved"])
            k = _nomic_rotary(qkv[:, :, 1], cos, sin, c["rotary_emb_interleaved"])
            v = qkv[:, :, 2]
            q, k, v = (t_.permute(0, 2, 1, 3) for t_ in (q, k, v))
            scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + ext
            ctx = torch.matmul(torch.softmax(scores, dim=-1), v).permute(0, 2, 1, 3).reshape(b, s, h)
            x = self.ln(self.lin(ctx, f"{p}.attn.out_proj") + x, f"{p}.norm1")
            y = self.lin(x, f"{p}.mlp.fc11") * F.silu(self.lin(x, f"{p}.mlp.fc12"))
            x = self.ln(self.lin(y, f"{p}.mlp.fc2") + x, f"{p}.norm2")
        return x


def nomic_orig_state_dict(cfg, seed):
    """Random original-layout weights, drawn in sorted-name order (see `random_tensor`)."""
    import torch
    h, inner, v, tv = cfg["n_embd"], cfg["n_inner"], cfg["vocab_size"], cfg["type_vocab_size"]
    shapes = {
        "embeddings.word_embeddings.weight": (v, h),
        "embeddings.token_type_embeddings.weight": (tv, h),
        "emb_ln.weight": (h,),
        "emb_ln.bias": (h,),
    }
    for i in range(cfg["n_layer"]):
        p = f"encoder.layers.{i}"
        shapes[f"{p}.attn.Wqkv.weight"] = (3 * h, h)
        if cfg["qkv_proj_bias"]:
            shapes[f"{p}.attn.Wqkv.bias"] = (3 * h,)
        shapes[f"{p}.attn.out_proj.weight"] = (h, h)
        if cfg["qkv_proj_bias"]:
            shapes[f"{p}.attn.out_proj.bias"] = (h,)
        shapes[f"{p}.mlp.fc11.weight"] = (inner, h)
        shapes[f"{p}.mlp.fc12.weight"] = (inner, h)
        if cfg["mlp_fc1_bias"]:
            shapes[f"{p}.mlp.fc11.bias"] = (inner,)
            shapes[f"{p}.mlp.fc12.bias"] = (inner,)
        shapes[f"{p}.mlp.fc2.weight"] = (h, inner)
        if cfg["mlp_fc2_bias"]:
            shapes[f"{p}.mlp.fc2.bias"] = (h,)
        for n in ("norm1", "norm2"):
            shapes[f"{p}.{n}.weight"] = (h,)
            shapes[f"{p}.{n}.bias"] = (h,)
    g = torch.Generator().manual_seed(seed)
    return {name: fc.random_tensor(name, shapes[name], g, init_value) for name in sorted(shapes)}


def is_norm(name):
    return any(t in name for t in ("LayerNorm", "layernorm", "norm1", "norm2", "emb_ln",
                                   "layer_norm"))


def init_value(name, r):
    """Scales of `fixture_common.init_value` (as python/gen_fixtures.py): linear weights
    N(0, 1/fan_in), embeddings N(0, 1), norm gamma 1 + 0.2 N(0,1), norm beta and every other
    bias 0.1 N(0,1); norms of every layout (transformers', the original `norm1/norm2/emb_ln`)."""
    return fc.init_value(name, r, is_norm=is_norm)


def hf_to_orig(sd):
    """transformers 5.x nomic key names -> the published checkpoints' (inverse of transformers'
    conversion mapping: Wqkv = cat(q, k, v), fc11 = up, fc12 = gate, fc2 = down)."""
    import torch
    out = {}
    layers = sorted({int(k.split(".")[1]) for k in sd if k.startswith("layers.")})
    out["embeddings.word_embeddings.weight"] = sd["embeddings.word_embeddings.weight"]
    out["embeddings.token_type_embeddings.weight"] = sd["embeddings.token_type_embeddings.weight"]
    out["emb_ln.weight"] = sd["embeddings.LayerNorm.weight"]
    out["emb_ln.bias"] = sd["embeddings.LayerNorm.bias"]
    for i in layers:
        a, p = f"layers.{i}", f"encoder.layers.{i}"
        out[f"{p}.attn.Wqkv.weight"] = torch.cat([sd[f"{a}.self_attn.{n}_proj.weight"] for n in "qkv"])
        out[f"{p}.attn.out_proj.weight"] = sd[f"{a}.self_attn.o_proj.weight"]
        out[f"{p}.mlp.fc11.weight"] = sd[f"{a}.mlp.up_proj.weight"]
        out[f"{p}.mlp.fc12.weight"] = sd[f"{a}.mlp.gate_proj.weight"]
        out[f"{p}.mlp.fc2.weight"] = sd[f"{a}.mlp.down_proj.weight"]
        for src, dst in (("post_attention_layernorm", "norm1"), ("post_mlp_layernorm", "norm2")):
            out[f"{p}.{dst}.weight"] = sd[f"{a}.{src}.weight"]
            out[f"{p}.{dst}.bias"] = sd[f"{a}.{src}.bias"]
    return out


# --------------------------------------------------------------------------------------------
# goldens
# --------------------------------------------------------------------------------------------

def st_modules(d, fx):
    """sentence-transformers' own Pooling (+ Normalize) modules, loaded from the directory."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling
    mods = [Pooling.load(os.path.join(d, "1_Pooling"))]
    if fx["normalize"]:
        mods.append(Normalize())
    return mods


def apply_st(mods, tok, mask):
    feats = {"token_embeddings": tok, "attention_mask": mask}
    for m in mods:
        feats = m(feats)
    return feats["sentence_embedding"]


def max_len(fx):
    c = fx["config"]
    return c.get("max_position_embeddings") or c["n_positions"]


def make_sequence(vocab, rng, length, pair):
    """BERT framing (python/gen_fixtures.py): [CLS] a... [SEP] (b... [SEP])."""
    sp = BERT_SPECIAL
    return fc.framed_sequence(rng, length, vocab, sp["cls"], sp["sep"], sp["first_word"], pair)


def generate(fx, out_root):
    import torch
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    d = fc.fresh_dir(out_root, fx["name"])
    cfg = fx["config"]
    hidden = cfg.get("hidden_size") or cfg["n_embd"]
    st_full = None

    # 1. checkpoint + reference forward `run(ids, mask, types) -> last hidden state`
    if fx["kind"] == "nomic_hf":
        import transformers as tf
        model = tf.NomicBertModel(tf.NomicBertConfig(**cfg))
        fc.randomize(model, fx["seed"], init_value)
        model.save_pretrained(d)
        fc.write_st_layout(d, fx, hidden=hidden)
        ref = fc.load_reference_model(tf.NomicBertModel, d, fx["name"])

        def run(ids, mask, types):
            with torch.no_grad():
                return ref(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state

        # cross-check NomicReference (used for nomic_orig) against transformers
        ocfg = dict(FIXTURES[1]["config"], n_embd=hidden, n_head=cfg["num_attention_heads"],
                    n_layer=cfg["num_hidden_layers"], n_inner=cfg["intermediate_size"],
                    layer_norm_epsilon=cfg["layer_norm_eps"], rotary_emb_fraction=1.0,
                    rotary_emb_base=cfg["rope_parameters"]["rope_theta"], qkv_proj_bias=False,
                    mlp_fc1_bias=False, mlp_fc2_bias=False)
        mine = NomicReference(ocfg, hf_to_orig(dict(ref.state_dict())))
        ids, mask, tt = fc.padded_batch([[2, 5, 9, 3], [2, 7, 3]], None, 0)
        with torch.no_grad():
            diff = (run(ids, mask, tt) - mine(ids, mask, tt))[mask.bool()].abs().max().item()
        if diff > 1e-5:
            raise RuntimeError(f"NomicReference disagrees with transformers by {diff}")
        st_full = fc.load_sentence_transformer(d)
    elif fx["kind"] == "nomic_orig":
        sd = nomic_orig_state_dict(cfg, fx["seed"])
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        fc.write_json(os.path.join(d, "config.json"), cfg)
        fc.write_st_layout(d, fx, hidden=hidden)
        ref = NomicReference(cfg, sd)

        def run(ids, mask, types):
            with torch.no_grad():
                return ref(ids, mask, types)
    else:
        from jina_reference import JinaBertModel, JinaConfig
        jc = JinaConfig(**cfg)
        model = JinaBertModel(jc)
        fc.randomize(model, fx["seed"], init_value)
        model.eval()
        sd = {k: v.contiguous() for k, v in model.state_dict().items()}
        save_file(sd, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        fc.write_json(os.path.join(d, "config.json"), jc.to_hub_json())
        if fx["prefix"]:
            fc.add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
        fc.write_st_layout(d, fx, hidden=hidden)

        def run(ids, mask, types):
            with torch.no_grad():
                return model(ids, mask, types)

    mods = st_modules(d, fx)
    pad = cfg.get("pad_token_id", 0)

    def embed(s):
        x = torch.tensor([s], dtype=torch.long)
        m = torch.ones_like(x)
        with torch.no_grad():
            emb = apply_st(mods, run(x, m, torch.zeros_like(x)), m)[0]
            if st_full is not None:
                emb2 = st_full.forward({"input_ids": x, "attention_mask": m})["sentence_embedding"][0]
                diff = (emb - emb2).abs().max().item()
                if diff > 1e-6:
                    raise RuntimeError(f"SentenceTransformer disagrees by {diff}")
        return f32_list(emb)

    n = max_len(fx)
    cases = fc.standard_cases(
        lambda rng, length, pair: make_sequence(cfg["vocab_size"], rng, length, pair),
        random.Random(fx["seed"]),
        hidden=lambda seqs, types: fc.unpadded_rows(run(*fc.padded_batch(seqs, types, pad)), seqs),
        embed=embed, long_len=n, long_name=f"max_positions_{n}", typed=True)
    fc.write_fixture_golden(d, SCRIPT, cases, fixture=fx["name"], pooling=fx["pooling"],
                            normalize=fx["normalize"], storage_dtype="float32")

    if fx["name"] == "nomic_tiny":
        emb_ids = [c["input_ids"] for c in cases if c["kind"] == "embedding"]
        write_matryoshka(d, run, mods, emb_ids, hidden)
    return d


def write_matryoshka(d, run, mods, emb_ids, hidden):
    """Matryoshka truncation goldens: for each text, the mean-pooled vector (sentence-
    transformers Pooling), then (a) `truncated`: first N dims, L2-normalized (what
    sentence-transformers' `truncate_dim` + `normalize_embeddings` gives, and kin-infer's
    `--dimensions N`), and (b) `nomic_layer_norm`: the nomic-embed-text-v1.5 recipe
    `normalize(layer_norm(pooled)[:N])` (F.layer_norm without affine, eps 1e-5)."""
    import torch
    import torch.nn.functional as F
    from golden_json import dumps
    pool = mods[0]
    cases = []
    for s in emb_ids:
        x = torch.tensor([s], dtype=torch.long)
        m = torch.ones_like(x)
        with torch.no_grad():
            pooled = apply_st([pool], run(x, m, torch.zeros_like(x)), m)
            for n in MATRYOSHKA_DIMS:
                cases.append({
                    "input_ids": s,
                    "dimensions": n,
                    "truncated": f32_list(F.normalize(pooled[:, :n], p=2, dim=1)[0]),
                    "nomic_layer_norm": f32_list(
                        F.normalize(F.layer_norm(pooled, (hidden,))[:, :n], p=2, dim=1)[0]),
                })
    doc = {"tol": TOL, "cases": cases}
    with open(os.path.join(d, "matryoshka.json"), "w", encoding="utf-8", newline="\n") as f:
        f.write(dumps(doc) + "\n")


def main(argv=None):
    fc.main(argv, __doc__, FIXTURES, generate)


if __name__ == "__main__":
    main()
