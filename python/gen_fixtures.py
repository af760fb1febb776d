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

def fixture(name, family, seed, sizes, eps, dtype, prefix, pooling, normalize, max_seq_length, **extra):
    """One fixture: a BERT-layout config from `sizes` = (vocab, hidden, layers, heads,
    intermediate, max_positions, type_vocab) and the layer-norm `eps` (special ids as the
    family's tokenizer lays them out), the storage dtype, key prefix, pooling modes and
    normalization; `extra` adds `max_shard_size` or `normalize_dir`."""
    vocab, hidden, layers, heads, inter, max_pos, type_vocab = sizes
    special = dict(pad_token_id=0) if family == "bert" else dict(pad_token_id=1, bos_token_id=0, eos_token_id=2)
    config = dict(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                  intermediate_size=inter, max_position_embeddings=max_pos, type_vocab_size=type_vocab,
                  hidden_act="gelu", layer_norm_eps=eps, **special)
    return dict(name=name, family=family, seed=seed, config=config, dtype=dtype, prefix=prefix,
                pooling=pooling, normalize=normalize, max_seq_length=max_seq_length, **extra)


# One row per fixture: name, family, seed, sizes, eps, storage dtype, key prefix, pooling,
# normalize, max_seq_length. bert_multi_pool's modes are written to the config in
# fixture_common.POOL_FILE_ORDER (cls, mean, max); sentence-transformers concatenates them as
# cls, max, mean.
FIXTURES = [
    fixture("bert_tiny", "bert", 1001, (100, 48, 2, 3, 80, 64, 2), 1e-12, "float32", "bert.", ["mean"], True, 64),
    fixture("roberta_tiny", "roberta", 1002, (96, 40, 3, 5, 72, 66, 1), 1e-5, "float32", "roberta.", ["cls"],
            False, 64),
    fixture("xlmr_tiny", "xlm-roberta", 1003, (120, 36, 2, 3, 64, 48, 1), 1e-5, "float32", "", ["max"], False, 46),
    fixture("bert_bf16", "bert", 1004, (90, 32, 2, 2, 64, 48, 2), 1e-12, "bfloat16", "", ["mean_sqrt_len_tokens"],
            False, 48),
    fixture("bert_sharded", "bert", 1005, (110, 64, 3, 4, 96, 64, 2), 1e-12, "float16", "", ["lasttoken"], False,
            64, max_shard_size="100KB"),
    fixture("bert_multi_pool", "bert", 1006, (80, 24, 1, 3, 40, 40, 2), 1e-7, "float32", "", ["cls", "mean", "max"],
            True, 40, normalize_dir=False),
]

# Special token ids of the fixtures (no tokenizer is saved; these follow the usual layouts).
# BERT: BERT_SPECIAL (fixture_common); RoBERTa / XLM-R:
ROBERTA_SPECIAL = dict(bos=0, pad=1, eos=2, unk=3, first_word=4)


# The transformers classes of each family, by name.
MODELS = {
    "bert": ("BertConfig", "BertModel"),
    "roberta": ("RobertaConfig", "RobertaModel"),
    "xlm-roberta": ("XLMRobertaConfig", "XLMRobertaModel"),
}


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
    config_cls, model_cls = fc.model_classes(MODELS, fx["family"])
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
