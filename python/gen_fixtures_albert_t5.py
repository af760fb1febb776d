#!/usr/bin/env python3
"""Regenerate the ALBERT, T5, mT5 and sentence-t5-style fixtures under tests/fixtures/.

    python python/gen_fixtures_albert_t5.py                  # all of them, into tests/fixtures/
    python python/gen_fixtures_albert_t5.py --out /tmp/fx    # elsewhere
    python python/gen_fixtures_albert_t5.py --only t5_tiny st5_tiny

Same conventions as python/gen_fixtures.py (fixed seeds, byte-identical reruns, float32, eager
attention, golden format `kin-infer-golden/1`, tol 1e-4):

- `hidden` cases: one right-padded batch through transformers (`AlbertModel`,
  `T5EncoderModel`, `MT5EncoderModel`) with an attention mask; padded rows are dropped;
- `embedding` cases: `SentenceTransformer(dir).forward` on the features a tokenizer would give
  (Transformer, Pooling, Dense when present, Normalize when present), cross-checked against
  the same modules applied to our own transformers forward.

Fixtures:

- `albert_tiny`: 5 layers over 2 layer groups of 2 inner layers (group of layer i is
  int(i / (5 / 2)) = 0, 0, 0, 1, 1), embedding_size 16 != hidden 48, `gelu_new`.
- `albert_dense`: other sizes, 1 group shared by 3 layers, `gelu` (erf), tensor names under
  `albert.` (as saved from `AlbertForMaskedLM`), cls pooling, then a sentence-transformers
  `Dense` (bias, Tanh) 40 -> 20, no normalization.
- `t5_tiny`: T5 (`relu`), d_kv * num_heads = 48 != d_model 32, 16 buckets with a short
  relative_attention_max_distance of 8 (sequences up to 30 tokens).
- `mt5_tiny`: mT5 (`gated-gelu`, i.e. GeGLU with the tanh GELU), other sizes.
- `st5_tiny`: sentence-t5 layout: T5 (`gated-relu`), mean pooling, `Dense` (no bias, Identity)
  24 -> 16, Normalize.
"""

from __future__ import annotations

import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import fixture_common as fc  # noqa: E402

SCRIPT = "python/gen_fixtures_albert_t5.py"

def fixture(name, family, seed, config, pooling, dense, normalize, max_seq_length=64, **extra):
    """One fixture: its config, sentence-transformers pooling, Dense module (None: none),
    normalization and max_seq_length; `extra` adds a key `prefix`."""
    return dict(name=name, family=family, seed=seed, config=config, **extra, pooling=pooling,
                dense=dense, normalize=normalize, max_seq_length=max_seq_length)


def albert(vocab, emb, hidden, layers, groups, inner, heads, inter, act, max_pos, eps):
    """An ALBERT config: sizes, activation and eps; type vocab 2, ALBERT's special ids."""
    return dict(vocab_size=vocab, embedding_size=emb, hidden_size=hidden, num_hidden_layers=layers,
                num_hidden_groups=groups, inner_group_num=inner, num_attention_heads=heads,
                intermediate_size=inter, hidden_act=act, max_position_embeddings=max_pos,
                type_vocab_size=2, layer_norm_eps=eps, pad_token_id=0, bos_token_id=2, eos_token_id=3)


def t5(vocab, d_model, d_kv, heads, d_ff, layers, buckets, max_distance, proj):
    """A T5 config: sizes, relative-attention buckets and feed-forward kind; T5's ids."""
    return dict(vocab_size=vocab, d_model=d_model, d_kv=d_kv, num_heads=heads, d_ff=d_ff, num_layers=layers,
                relative_attention_num_buckets=buckets, relative_attention_max_distance=max_distance,
                feed_forward_proj=proj, layer_norm_epsilon=1e-6, pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=0)


FIXTURES = [
    fixture("albert_tiny", "albert", 2001, albert(100, 16, 48, 5, 2, 2, 4, 72, "gelu_new", 64, 1e-12),
            "mean", None, True),
    fixture("albert_dense", "albert", 2002, albert(90, 24, 40, 3, 1, 1, 5, 64, "gelu", 48, 1e-7),
            "cls", dict(out_features=20, bias=True, activation="Tanh"), False, 48, prefix="albert."),
    fixture("t5_tiny", "t5", 2003, t5(100, 32, 12, 4, 64, 3, 16, 8, "relu"), "mean", None, True),
    fixture("mt5_tiny", "mt5", 2004, t5(120, 40, 8, 3, 56, 2, 32, 20, "gated-gelu"), "mean", None, False),
    fixture("st5_tiny", "t5", 2005, t5(80, 24, 8, 2, 40, 2, 8, 16, "gated-relu"), "mean",
            dict(out_features=16, bias=False, activation="Identity"), True),
]

# Special ids (no tokenizer is saved). ALBERT: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3;
# T5: <pad>=0, </s>=1, <unk>=2, words >= 3.
ALBERT_SPECIAL = dict(pad=0, cls=2, sep=3, first_word=4)
T5_SPECIAL = dict(pad=0, eos=1, first_word=3)

T5_LONG = 60  # T5 has no position table: one long sequence, far past max_distance


# The transformers classes of each family, by name (T5s as encoder-only models).
MODELS = {
    "albert": ("AlbertConfig", "AlbertModel"),
    "t5": ("T5Config", "T5EncoderModel"),
    "mt5": ("MT5Config", "MT5EncoderModel"),
}


def hidden_size(fx):
    c = fx["config"]
    return c["hidden_size"] if fx["family"] == "albert" else c["d_model"]


def init_value(name, r):
    """Scales of `fixture_common.init_value`; norms are ALBERT's `LayerNorm`s and T5's
    `layer_norm`s, tables also T5's `shared` / `embed_tokens` and relative-bias tables."""
    return fc.init_value(
        name, r, is_norm=lambda n: "layernorm" in n.lower() or "layer_norm" in n.lower(),
        is_embedding=lambda n: "embeddings" in n or n.startswith("shared.") or "embed_tokens" in n
        or "relative_attention_bias" in n)


def dense_writer(fx):
    """Saves fx's sentence-transformers Dense (hidden -> out_features), weights N(0, 4/hidden),
    bias 0.1 N(0,1), from a generator seeded with seed + 500."""
    import torch
    from sentence_transformers.base.modules.dense import Dense
    spec = fx["dense"]
    h = hidden_size(fx)

    def write(path):
        act = getattr(torch.nn, spec["activation"])()
        dense = Dense(h, spec["out_features"], bias=spec["bias"], activation_function=act)
        g = torch.Generator().manual_seed(fx["seed"] + 500)
        with torch.no_grad():
            w = dense.linear.weight
            w.copy_(torch.randn(w.shape, generator=g) / (h ** 0.5) * 2.0)
            if spec["bias"]:
                b = dense.linear.bias
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
        dense.save(path)
    return write


def make_sequence(fx, rng, length, pair):
    vocab = fx["config"]["vocab_size"]
    if fx["family"] == "albert":
        sp = ALBERT_SPECIAL
        return fc.framed_sequence(rng, length, vocab, sp["cls"], sp["sep"], sp["first_word"], pair)
    sp = T5_SPECIAL
    ids = [rng.randrange(sp["first_word"], vocab) for _ in range(length - 1)] + [sp["eos"]]
    return ids, None


def load_sentence_transformer(d, fx):
    st = fc.load_sentence_transformer(d)
    want = ["Transformer", "Pooling"] + (["Dense"] if fx["dense"] else []) \
        + (["Normalize"] if fx["normalize"] else [])
    fc.st_names_check(st, fx["name"], want)
    hf = fc.st_auto_model(st)
    want_cls = fc.model_classes(MODELS, fx["family"])[1]
    if type(hf) is not want_cls:
        raise RuntimeError(f"{fx['name']}: sentence-transformers loaded {type(hf).__name__}")
    if fx["dense"]:
        act = type(st[2].activation_function).__name__
        if act != fx["dense"]["activation"]:
            raise RuntimeError(f"{fx['name']}: Dense activation {act}")
    return st


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)
    config_cls, model_cls = fc.model_classes(MODELS, fx["family"])
    d = fc.fresh_dir(out_root, fx["name"])

    torch.manual_seed(fx["seed"])
    model = model_cls(config_cls(**fx["config"]))  # AlbertModel keeps its pooler: ignored
    fc.randomize(model, fx["seed"], init_value)
    model.save_pretrained(d)
    if fx.get("prefix"):
        fc.add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    fc.write_st_layout(d, fx, hidden=hidden_size(fx), pooling=[fx["pooling"]],
                       dense=dense_writer(fx) if fx["dense"] else None)

    ref = fc.load_reference_model(model_cls, d, fx["name"])
    st = load_sentence_transformer(d, fx)
    albert = fx["family"] == "albert"
    pad = fx["config"]["pad_token_id"]
    n = fx["config"]["max_position_embeddings"] if albert else T5_LONG
    cases = fc.standard_cases(
        lambda rng, length, pair: make_sequence(fx, rng, length, pair), random.Random(fx["seed"]),
        hidden=lambda seqs, types: fc.hidden_reference(ref, pad, seqs, types),
        embed=lambda ids: fc.embedding_reference(st, ref, ids),
        long_len=n, long_name=f"{'max_positions' if albert else 'long'}_{n}", typed=albert)
    fc.write_fixture_golden(d, SCRIPT, cases, fixture=fx["name"], pooling=[fx["pooling"]],
                            dense=fx["dense"], normalize=fx["normalize"], storage_dtype="float32")
    return d


def main(argv=None):
    fc.main(argv, __doc__, FIXTURES, generate)


if __name__ == "__main__":
    main()
