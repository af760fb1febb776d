#!/usr/bin/env python3
"""Regenerate the tiny random DeBERTa (v1) and DeBERTa-v2/v3 fixtures and their goldens.

    python python/gen_fixtures_deberta.py                 # all, into tests/fixtures/
    python python/gen_fixtures_deberta.py --out /tmp/fx   # elsewhere
    python python/gen_fixtures_deberta.py --only deberta_v1_tiny
    python python/gen_fixtures_deberta.py --check-buckets # log buckets: our emulation vs torch

Same conventions as python/gen_fixtures.py (helpers shared in python/fixture_common.py):
fixed seeds and byte-identical reruns, float32, eager attention, a right-padded `hidden` batch
computed with an attention mask, `embedding` cases from sentence-transformers' own modules.

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

import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fixture_common as fc  # noqa: E402

SCRIPT = "python/gen_fixtures_deberta.py"

COMMON = dict(hidden_act="gelu", pad_token_id=0, relative_attention=True)

def fixture(name, family, seed, sizes, eps, prefix, pooling, normalize, file=None, **config):
    """One fixture: `sizes` = (vocab, hidden, layers, heads, intermediate, max_positions,
    type_vocab) and the layer-norm `eps` over COMMON, then the family's own `config` keys;
    `file` is `pos_att_type_in_file` (the spelling written to config.json) when given."""
    vocab, hidden, layers, heads, inter, max_pos, type_vocab = sizes
    cfg = dict(COMMON, vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
               num_attention_heads=heads, intermediate_size=inter, max_position_embeddings=max_pos,
               type_vocab_size=type_vocab, layer_norm_eps=eps, **config)
    fx = dict(name=name, family=family, seed=seed, config=cfg, prefix=prefix, pooling=pooling,
              normalize=normalize)
    if file is not None:
        fx["pos_att_type_in_file"] = file
    return fx


V2 = dict(share_att_key=True, norm_rel_ebd="layer_norm")

# One row per fixture: name, family, seed, sizes, eps, key prefix, pooling, normalize, then
# the family's keys. deberta_v1_tiny writes the Hub's older `pos_att_type` spelling, as
# microsoft/deberta-base does.
FIXTURES = [
    fixture("deberta_v1_tiny", "deberta", 4101, (100, 48, 2, 4, 80, 64, 2), 1e-7, "deberta.", ["mean"], True,
            file="c2p|p2c", max_relative_positions=8, position_biased_input=True, pos_att_type=["c2p", "p2c"]),
    fixture("deberta_v1_other", "deberta", 4102, (90, 40, 3, 5, 72, 48, 0), 1e-7, "", ["cls"], False,
            max_relative_positions=-1, position_biased_input=False, pos_att_type=["c2p"], embedding_size=32),
    fixture("deberta_v2_tiny", "deberta-v2", 4201, (100, 48, 2, 4, 96, 64, 0), 1e-7, "deberta.", ["mean"], True,
            max_relative_positions=32, position_buckets=8, **V2, position_biased_input=False,
            pos_att_type=["p2c", "c2p"]),
    fixture("deberta_v2_conv", "deberta-v2", 4202, (80, 32, 3, 2, 64, 56, 2), 1e-7, "", ["max"], False,
            max_relative_positions=40, position_buckets=16, share_att_key=False, norm_rel_ebd="none",
            position_biased_input=True, pos_att_type=["p2c", "c2p"], conv_kernel_size=3, conv_act="gelu",
            conv_groups=2),
    fixture("deberta_v2_other", "deberta-v2", 4203, (70, 36, 1, 3, 56, 40, 0), 1e-6, "", ["mean_sqrt_len_tokens"],
            False, max_relative_positions=12, position_buckets=-1, **V2, position_biased_input=True,
            pos_att_type=["p2c"], conv_kernel_size=5, conv_act="tanh", conv_groups=1, hidden_act="gelu_new"),
]

# DeBERTa tokenizers: [PAD]=0, [CLS]=1, [SEP]=2, [UNK]=3.
SPECIAL = dict(pad=0, cls=1, sep=2, first_word=4)


# The transformers classes of each family, by name.
MODELS = {
    "deberta": ("DebertaConfig", "DebertaModel"),
    "deberta-v2": ("DebertaV2Config", "DebertaV2Model"),
}


def init_value(name, r):
    """Scales of `fixture_common.init_value`, conv1d weights included: linear and conv weights
    N(0, 1/fan_in), embedding tables (incl. rel_embeddings) N(0, 1), LayerNorm gamma
    1 + 0.2 N(0,1), every bias (incl. q_bias, v_bias) 0.1 N(0,1)."""
    return fc.init_value(name, r, is_norm=lambda n: "LayerNorm" in n,
                         is_bias=lambda n: n.endswith("bias"), conv=True)


def make_sequence(fx, rng, length, pair):
    return fc.framed_sequence(rng, length, fx["config"]["vocab_size"], SPECIAL["cls"],
                              SPECIAL["sep"], SPECIAL["first_word"], pair)


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)
    config_cls, model_cls = fc.model_classes(MODELS, fx["family"])
    d = fc.fresh_dir(out_root, fx["name"])

    torch.manual_seed(fx["seed"])
    cfg = config_cls(**fx["config"])
    model = model_cls(cfg)
    fc.randomize(model, fx["seed"], init_value)
    model.save_pretrained(d)
    if fx["prefix"]:
        fc.add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    if "pos_att_type_in_file" in fx:
        path = os.path.join(d, "config.json")
        with open(path, encoding="utf-8") as f:
            c = json.load(f)
        c["pos_att_type"] = fx["pos_att_type_in_file"]
        fc.write_json(path, c)
    max_len = fx["config"]["max_position_embeddings"]
    fx = dict(fx, max_seq_length=max_len)
    fc.write_st_layout(d, fx)

    ref = fc.load_reference_model(model_cls, d, fx["name"])
    st = fc.load_sentence_transformer(d)
    st_modes = fc.check_st_modules(st, fx)
    pad = fx["config"]["pad_token_id"]
    cases = fc.standard_cases(
        lambda rng, length, pair: make_sequence(fx, rng, length, pair), random.Random(fx["seed"]),
        hidden=lambda seqs, types: fc.hidden_reference(ref, pad, seqs, types),
        embed=lambda ids: fc.embedding_reference(st, ref, ids),
        long_len=max_len, long_name=f"max_positions_{max_len}",
        typed=fx["config"]["type_vocab_size"] > 0)
    fc.write_fixture_golden(d, SCRIPT, cases, fixture=fx["name"], pooling=st_modes,
                            normalize=fx["normalize"], storage_dtype="float32")
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
    def buckets_only(args):
        if args.check_buckets:
            sys.exit(1 if check_buckets() else 0)

    fc.main(argv, __doc__, FIXTURES, generate, before=buckets_only,
            add_arguments=lambda ap: ap.add_argument("--check-buckets", action="store_true"))


if __name__ == "__main__":
    main()
