#!/usr/bin/env python3
"""Regenerate the tiny random encoder fixtures under tests/fixtures/ and their goldens.

    pip install -r python/requirements.txt
    python python/gen_fixtures.py                 # all fixtures, into tests/fixtures/
    python python/gen_fixtures.py --out /tmp/fx   # elsewhere (used by python/test_goldens.py)
    python python/gen_fixtures.py --only bert_tiny roberta_tiny

Everything is derived from fixed seeds; running the script twice gives byte-identical files.
Each fixture directory holds:

- a transformers checkpoint written by `save_pretrained` (config.json + safetensors; for some
  fixtures the tensor names are rewritten with the head-model prefix `bert.` / `roberta.`, as in
  real checkpoints saved from `BertForMaskedLM` etc.),
- a sentence-transformers layout (modules.json, 1_Pooling/config.json, optional 2_Normalize/,
  sentence_bert_config.json) -- no tokenizer: golden cases are given as token ids,
- golden.json (format `kin-infer-golden/1`): `hidden` cases computed with transformers
  (float32, eager attention, one right-padded batch) and `embedding` cases computed with
  sentence-transformers' own modules.

Reduced-precision fixtures (bf16, f16) are computed from the stored weights widened to f32,
which is what the Rust engine computes.
"""

from __future__ import annotations

import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fixture_common as fc  # noqa: E402
from fixture_common import BERT_SPECIAL  # noqa: E402

SCRIPT = "python/gen_fixtures.py"

# Each fixture: model family and config, storage dtype, optional sharding and key prefix, pooling.
FIXTURES = [
    dict(
        name="bert_tiny",
        family="bert",
        seed=1001,
        config=dict(vocab_size=100, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                    intermediate_size=80, max_position_embeddings=64, type_vocab_size=2,
                    hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0),
        dtype="float32",
        prefix="bert.",
        pooling=["mean"],
        normalize=True,
        max_seq_length=64,
    ),
    dict(
        name="roberta_tiny",
        family="roberta",
        seed=1002,
        config=dict(vocab_size=96, hidden_size=40, num_hidden_layers=3, num_attention_heads=5,
                    intermediate_size=72, max_position_embeddings=66, type_vocab_size=1,
                    hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                    eos_token_id=2),
        dtype="float32",
        prefix="roberta.",
        pooling=["cls"],
        normalize=False,
        max_seq_length=64,
    ),
    dict(
        name="xlmr_tiny",
        family="xlm-roberta",
        seed=1003,
        config=dict(vocab_size=120, hidden_size=36, num_hidden_layers=2, num_attention_heads=3,
                    intermediate_size=64, max_position_embeddings=48, type_vocab_size=1,
                    hidden_act="gelu", layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0,
                    eos_token_id=2),
        dtype="float32",
        prefix="",
        pooling=["max"],
        normalize=False,
        max_seq_length=46,
    ),
    dict(
        name="bert_bf16",
        family="bert",
        seed=1004,
        config=dict(vocab_size=90, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=48, type_vocab_size=2,
                    hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0),
        dtype="bfloat16",
        prefix="",
        pooling=["mean_sqrt_len_tokens"],
        normalize=False,
        max_seq_length=48,
    ),
    dict(
        name="bert_sharded",
        family="bert",
        seed=1005,
        config=dict(vocab_size=110, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                    intermediate_size=96, max_position_embeddings=64, type_vocab_size=2,
                    hidden_act="gelu", layer_norm_eps=1e-12, pad_token_id=0),
        dtype="float16",
        max_shard_size="100KB",
        prefix="",
        pooling=["lasttoken"],
        normalize=False,
        max_seq_length=64,
    ),
    dict(
        name="bert_multi_pool",
        family="bert",
        seed=1006,
        config=dict(vocab_size=80, hidden_size=24, num_hidden_layers=1, num_attention_heads=3,
                    intermediate_size=40, max_position_embeddings=40, type_vocab_size=2,
                    hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0),
        dtype="float32",
        prefix="",
        # written to the config in fixture_common.POOL_FILE_ORDER (cls, mean, max);
        # sentence-transformers concatenates as cls, max, mean.
        pooling=["cls", "mean", "max"],
        normalize=True,
        normalize_dir=False,
        max_seq_length=40,
    ),
]

# Special token ids of the fixtures (no tokenizer is saved; these follow the usual layouts).
# BERT: BERT_SPECIAL (fixture_common); RoBERTa / XLM-R:
ROBERTA_SPECIAL = dict(bos=0, pad=1, eos=2, unk=3, first_word=4)


def model_classes(family):
    import transformers as tf
    return {
        "bert": (tf.BertConfig, tf.BertModel),
        "roberta": (tf.RobertaConfig, tf.RobertaModel),
        "xlm-roberta": (tf.XLMRobertaConfig, tf.XLMRobertaModel),
    }[family]


def init_value(name, r):
    """Scales of `fixture_common.init_value`; norms are the `LayerNorm`s, tables `embeddings`."""
    return fc.init_value(name, r, is_norm=lambda n: "LayerNorm" in n)


def make_sequence(fx, rng, length, pair):
    """A sequence of `length` ids framed like the family's tokenizer would frame it.

    BERT: [CLS] a... [SEP] (b... [SEP]) with token types 0 for segment a, 1 for segment b.
    RoBERTa/XLM-R: <s> ... </s>; no token types (never a pair).
    """
    if fx["family"] == "bert":
        sp = BERT_SPECIAL
        start, end = sp["cls"], sp["sep"]
    else:
        sp = ROBERTA_SPECIAL
        start, end = sp["bos"], sp["eos"]
    return fc.framed_sequence(rng, length, fx["config"]["vocab_size"], start, end,
                              sp["first_word"], pair and fx["family"] == "bert")


def max_len(fx):
    cfg = fx["config"]
    if fx["family"] == "bert":
        return cfg["max_position_embeddings"]
    # RoBERTa positions run padding_idx+1 .. padding_idx+len, all < max_position_embeddings.
    return cfg["max_position_embeddings"] - cfg["pad_token_id"] - 1


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)  # reproducible reductions
    config_cls, model_cls = model_classes(fx["family"])
    d = fc.fresh_dir(out_root, fx["name"])

    # 1. checkpoint
    torch.manual_seed(fx["seed"])
    cfg = config_cls(**fx["config"])
    model = model_cls(cfg)  # BertModel etc. keep their pooler; the engine must ignore it
    fc.randomize(model, fx["seed"], init_value)
    dtype = getattr(torch, fx["dtype"])
    save_kwargs = {}
    if "max_shard_size" in fx:
        save_kwargs["max_shard_size"] = fx["max_shard_size"]
    model.to(dtype).save_pretrained(d, **save_kwargs)
    if fx.get("max_shard_size"):
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        assert len(files) >= 2 and os.path.exists(os.path.join(d, "model.safetensors.index.json")), files
    if fx["prefix"]:
        fc.add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    fc.write_st_layout(d, fx)

    # 2. golden, always from what is on disk, widened to f32
    ref = fc.load_reference_model(model_cls, d, fx["name"])
    st = fc.load_sentence_transformer(d)
    st_modes = fc.check_st_modules(st, fx)
    pad = fx["config"]["pad_token_id"]
    n = max_len(fx)
    cases = fc.standard_cases(
        lambda rng, length, pair: make_sequence(fx, rng, length, pair), random.Random(fx["seed"]),
        hidden=lambda seqs, types: fc.hidden_reference(ref, pad, seqs, types),
        embed=lambda ids: fc.embedding_reference(st, ref, ids),
        long_len=n, long_name=f"max_positions_{n}", typed=fx["family"] == "bert")
    fc.write_fixture_golden(d, SCRIPT, cases, fixture=fx["name"], pooling=st_modes,
                            normalize=fx["normalize"], storage_dtype=fx["dtype"])
    return d


def main(argv=None):
    fc.main(argv, __doc__, FIXTURES, generate)


if __name__ == "__main__":
    main()
