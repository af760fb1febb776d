#!/usr/bin/env python3
"""Regenerate the tiny random DeBERTa (v1) and DeBERTa-v2/v3 fixtures and their goldens.

    python python/gen_fixtures_deberta.py                 # all, into tests/fixtures/
    python python/gen_fixtures_deberta.py --out /tmp/fx   # elsewhere
    python python/gen_fixtures_deberta.py --only deberta_v1_tiny
    python python/gen_fixtures_deberta.py --check-buckets # log buckets: our emulation vs torch

Same conventions as python/gen_fixtures.py (whose helpers it reuses): fixed seeds and
byte-identical reruns, float32, eager attention, a right-padded `hidden` batch computed with
an attention mask, `embedding` cases from sentence-transformers' own modules.

What the fixtures cover:

- deberta_v1_tiny: v1 fused `in_proj` + q_bias/v_bias, c2p and p2c (written as the legacy
  `"c2p|p2c"` string), relative positions clamped at max_relative_positions 8 (sequences up
  to 64), absolute positions added, token types, `deberta.` key prefix.
- deberta_v1_other: other sizes, c2p only (scale factor 2), max_relative_positions -1
  (falls back to max_position_embeddings), no absolute positions, embedding_size != hidden
  (embed_proj), no token types.
- deberta_v2_tiny: log buckets (position_buckets 8, max_relative_positions 32, sequences up to
  64), share_att_key, LayerNorm on the relative embeddings, no absolute positions.
- deberta_v2_conv: ConvLayer after the first layer (kernel 3, gelu, 2 groups), separate
  pos_key_proj / pos_query_proj, buckets 16.
- deberta_v2_other: other sizes, no buckets (position_buckets -1, clamped at 12), p2c only,
  conv kernel 5 with tanh, gelu_new feed-forward.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from golden_json import f32_list, package_versions, write_golden  # noqa: E402
from gen_fixtures import (  # noqa: E402
    add_prefix,
    check_st_modules,
    embedding_reference,
    hidden_reference,
    load_sentence_transformer,
    write_json,
    write_st_layout,
)

TOL = 1e-4

COMMON = dict(hidden_act="gelu", pad_token_id=0, relative_attention=True)

FIXTURES = [
    dict(
        name="deberta_v1_tiny",
        family="deberta",
        seed=4101,
        config=dict(COMMON, vocab_size=100, hidden_size=48, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=80, max_position_embeddings=64,
                    type_vocab_size=2, layer_norm_eps=1e-7, max_relative_positions=8,
                    position_biased_input=True, pos_att_type=["c2p", "p2c"]),
        # the Hub's older spelling, as microsoft/deberta-base writes it
        pos_att_type_in_file="c2p|p2c",
        prefix="deberta.",
        pooling=["mean"],
        normalize=True,
    ),
    dict(
        name="deberta_v1_other",
        family="deberta",
        seed=4102,
        config=dict(COMMON, vocab_size=90, hidden_size=40, num_hidden_layers=3,
                    num_attention_heads=5, intermediate_size=72, max_position_embeddings=48,
                    type_vocab_size=0, layer_norm_eps=1e-7, max_relative_positions=-1,
                    position_biased_input=False, pos_att_type=["c2p"], embedding_size=32),
        prefix="",
        pooling=["cls"],
        normalize=False,
    ),
    dict(
        name="deberta_v2_tiny",
        family="deberta-v2",
        seed=4201,
        config=dict(COMMON, vocab_size=100, hidden_size=48, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=96, max_position_embeddings=64,
                    type_vocab_size=0, layer_norm_eps=1e-7, max_relative_positions=32,
                    position_buckets=8, share_att_key=True, norm_rel_ebd="layer_norm",
                    position_biased_input=False, pos_att_type=["p2c", "c2p"]),
        prefix="deberta.",
        pooling=["mean"],
        normalize=True,
    ),
    dict(
        name="deberta_v2_conv",
        family="deberta-v2",
        seed=4202,
        config=dict(COMMON, vocab_size=80, hidden_size=32, num_hidden_layers=3,
                    num_attention_heads=2, intermediate_size=64, max_position_embeddings=56,
                    type_vocab_size=2, layer_norm_eps=1e-7, max_relative_positions=40,
                    position_buckets=16, share_att_key=False, norm_rel_ebd="none",
                    position_biased_input=True, pos_att_type=["p2c", "c2p"],
                    conv_kernel_size=3, conv_act="gelu", conv_groups=2),
        prefix="",
        pooling=["max"],
        normalize=False,
    ),
    dict(
        name="deberta_v2_other",
        family="deberta-v2",
        seed=4203,
        config=dict(COMMON, vocab_size=70, hidden_size=36, num_hidden_layers=1,
                    num_attention_heads=3, intermediate_size=56, max_position_embeddings=40,
                    type_vocab_size=0, layer_norm_eps=1e-6, max_relative_positions=12,
                    position_buckets=-1, share_att_key=True, norm_rel_ebd="layer_norm",
                    position_biased_input=True, pos_att_type=["p2c"],
                    conv_kernel_size=5, conv_act="tanh", conv_groups=1,
                    hidden_act="gelu_new"),
        prefix="",
        pooling=["mean_sqrt_len_tokens"],
        normalize=False,
    ),
]

# DeBERTa tokenizers: [PAD]=0, [CLS]=1, [SEP]=2, [UNK]=3.
SPECIAL = dict(pad=0, cls=1, sep=2, first_word=4)
HIDDEN_BATCH_LENGTHS = [13, 1, 30, 5, 2]
EMBEDDING_LENGTHS = [1, 6, 21]


def model_classes(family):
    import transformers as tf
    return {
        "deberta": (tf.DebertaConfig, tf.DebertaModel),
        "deberta-v2": (tf.DebertaV2Config, tf.DebertaV2Model),
    }[family]


def randomize(model, seed):
    """Every parameter from a seeded generator, in sorted-name order (see gen_fixtures.py):
    linear and conv weights N(0, 1/fan_in), embedding tables (incl. rel_embeddings) N(0, 1),
    LayerNorm gamma 1 + 0.2 N(0,1), every bias (incl. q_bias, v_bias) 0.1 N(0,1)."""
    import torch
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "LayerNorm" in name and name.endswith(".weight"):
                v = 1.0 + 0.2 * r
            elif name.endswith("bias"):
                v = 0.1 * r
            elif "embeddings" in name:
                v = r
            elif p.dim() == 2:
                v = r / (p.shape[1] ** 0.5)
            elif p.dim() == 3:  # conv1d [out, in/groups, k]
                v = r / ((p.shape[1] * p.shape[2]) ** 0.5)
            else:  # pragma: no cover
                raise ValueError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(v)


def make_sequence(fx, rng, length, pair):
    vocab = fx["config"]["vocab_size"]
    word = lambda: rng.randrange(SPECIAL["first_word"], vocab)  # noqa: E731
    if length == 1:
        ids = [SPECIAL["cls"]]
    else:
        ids = [SPECIAL["cls"]] + [word() for _ in range(length - 2)] + [SPECIAL["sep"]]
    types = [0] * length
    if pair and length >= 7:
        cut = 1 + (length - 2) // 2
        ids[cut] = SPECIAL["sep"]
        types = [0] * (cut + 1) + [1] * (length - cut - 1)
    return ids, types


def load_reference_model(d, fx):
    import torch
    _, model_cls = model_classes(fx["family"])
    model, info = model_cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                            output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise RuntimeError(f"{fx['name']}: checkpoint did not load cleanly: {bad}")
    model.eval()
    return model


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)
    config_cls, model_cls = model_classes(fx["family"])
    d = os.path.join(out_root, fx["name"])
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)

    torch.manual_seed(fx["seed"])
    cfg = config_cls(**fx["config"])
    model = model_cls(cfg)
    randomize(model, fx["seed"])
    model.save_pretrained(d)
    if fx["prefix"]:
        add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    if "pos_att_type_in_file" in fx:
        path = os.path.join(d, "config.json")
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
        c["pos_att_type"] = fx["pos_att_type_in_file"]
        write_json(path, c)
    max_len = fx["config"]["max_position_embeddings"]
    fx = dict(fx, max_seq_length=max_len)
    write_st_layout(d, fx)

    ref = load_reference_model(d, fx)
    st = load_sentence_transformer(d)
    st_modes = check_st_modules(st, fx)

    rng = random.Random(fx["seed"])
    typed = fx["config"]["type_vocab_size"] > 0
    cases = []
    seqs, types = [], []
    for n in HIDDEN_BATCH_LENGTHS:
        s, t = make_sequence(fx, rng, n, pair=True)
        seqs.append(s)
        types.append(t)
    case = {"name": "padded_batch_" + "_".join(str(n) for n in HIDDEN_BATCH_LENGTHS),
            "kind": "hidden", "input_ids": seqs}
    if typed:
        case["token_type_ids"] = types
    case["expected"] = hidden_reference(ref, fx, seqs, types if typed else None)
    cases.append(case)

    s, t = make_sequence(fx, rng, max_len, pair=True)
    case = {"name": f"max_positions_{max_len}", "kind": "hidden", "input_ids": [s]}
    if typed:
        case["token_type_ids"] = [t]
    case["expected"] = hidden_reference(ref, fx, [s], [t] if typed else None)
    cases.append(case)

    for n in EMBEDDING_LENGTHS:
        s, _ = make_sequence(fx, rng, n, pair=False)
        cases.append({"name": f"embedding_len_{n}", "kind": "embedding", "input_ids": s,
                      "expected": embedding_reference(st, ref, s)})

    extra = {
        "generator": {"script": "python/gen_fixtures_deberta.py", "fixture": fx["name"],
                      "pooling": st_modes, "normalize": fx["normalize"],
                      "storage_dtype": "float32", "versions": package_versions()},
    }
    write_golden(os.path.join(d, "golden.json"), TOL, cases, extra)
    return d


def check_buckets():
    """The engine computes make_log_bucket_position in float32 with a correctly rounded log
    (crates/kin-infer/src/models/encoders/deberta.rs); torch uses its own vectorized log.
    Compare the two bucket tables for common configurations (prints mismatches)."""
    import numpy as np
    import torch
    from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position
    bad = 0
    for buckets, max_pos in [(256, 512), (128, 512), (256, 1024), (8, 32), (16, 40), (64, 256),
                             (32, 128), (256, 2048), (512, 1024)]:
        rel = torch.arange(-4 * max_pos, 4 * max_pos + 1)
        want = make_log_bucket_position(rel, buckets, max_pos).long().numpy()
        mid = buckets // 2
        a = np.abs(rel.numpy())
        big = np.maximum(a, mid + 1)  # the log is only used above mid
        # as the engine: f32 division, correctly rounded log, f32 steps
        ratio = big.astype(np.float32) / np.float32(mid)
        num = np.log(ratio.astype(np.float64)).astype(np.float32)
        den = np.float32(np.log(np.float64(np.float32((max_pos - 1) / mid))))
        x = (num / den).astype(np.float32) * np.float32(mid - 1)
        log_pos = np.ceil(x).astype(np.int64) + mid
        got = np.where(a <= mid, rel.numpy(), np.sign(rel.numpy()) * log_pos)
        n = int((got != want).sum())
        bad += n
        print(f"buckets {buckets} max_position {max_pos}: {n} mismatches")
    return bad


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--check-buckets", action="store_true")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if args.check_buckets:
        sys.exit(1 if check_buckets() else 0)
    names = {f["name"] for f in FIXTURES}
    if args.only and set(args.only) - names:
        ap.error(f"unknown fixture(s): {sorted(set(args.only) - names)}; known: {sorted(names)}")
    os.makedirs(args.out, exist_ok=True)
    for fx in FIXTURES:
        if args.only and fx["name"] not in args.only:
            continue
        print(generate(fx, args.out))


if __name__ == "__main__":
    main()
