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

import argparse
import os
import random
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from golden_json import f32_list, package_versions, write_golden  # noqa: E402
from gen_fixtures import add_prefix, write_json  # noqa: E402

TOL = 1e-4
SCRIPT = "python/gen_fixtures_albert_t5.py"

FIXTURES = [
    dict(
        name="albert_tiny",
        family="albert",
        seed=2001,
        config=dict(vocab_size=100, embedding_size=16, hidden_size=48, num_hidden_layers=5,
                    num_hidden_groups=2, inner_group_num=2, num_attention_heads=4,
                    intermediate_size=72, hidden_act="gelu_new", max_position_embeddings=64,
                    type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0, bos_token_id=2,
                    eos_token_id=3),
        pooling="mean",
        dense=None,
        normalize=True,
        max_seq_length=64,
    ),
    dict(
        name="albert_dense",
        family="albert",
        seed=2002,
        config=dict(vocab_size=90, embedding_size=24, hidden_size=40, num_hidden_layers=3,
                    num_hidden_groups=1, inner_group_num=1, num_attention_heads=5,
                    intermediate_size=64, hidden_act="gelu", max_position_embeddings=48,
                    type_vocab_size=2, layer_norm_eps=1e-7, pad_token_id=0, bos_token_id=2,
                    eos_token_id=3),
        prefix="albert.",
        pooling="cls",
        dense=dict(out_features=20, bias=True, activation="Tanh"),
        normalize=False,
        max_seq_length=48,
    ),
    dict(
        name="t5_tiny",
        family="t5",
        seed=2003,
        config=dict(vocab_size=100, d_model=32, d_kv=12, num_heads=4, d_ff=64, num_layers=3,
                    relative_attention_num_buckets=16, relative_attention_max_distance=8,
                    feed_forward_proj="relu", layer_norm_epsilon=1e-6, pad_token_id=0,
                    eos_token_id=1, decoder_start_token_id=0),
        pooling="mean",
        dense=None,
        normalize=True,
        max_seq_length=64,
    ),
    dict(
        name="mt5_tiny",
        family="mt5",
        seed=2004,
        config=dict(vocab_size=120, d_model=40, d_kv=8, num_heads=3, d_ff=56, num_layers=2,
                    relative_attention_num_buckets=32, relative_attention_max_distance=20,
                    feed_forward_proj="gated-gelu", layer_norm_epsilon=1e-6, pad_token_id=0,
                    eos_token_id=1, decoder_start_token_id=0),
        pooling="mean",
        dense=None,
        normalize=False,
        max_seq_length=64,
    ),
    dict(
        name="st5_tiny",
        family="t5",
        seed=2005,
        config=dict(vocab_size=80, d_model=24, d_kv=8, num_heads=2, d_ff=40, num_layers=2,
                    relative_attention_num_buckets=8, relative_attention_max_distance=16,
                    feed_forward_proj="gated-relu", layer_norm_epsilon=1e-6, pad_token_id=0,
                    eos_token_id=1, decoder_start_token_id=0),
        pooling="mean",
        dense=dict(out_features=16, bias=False, activation="Identity"),
        normalize=True,
        max_seq_length=64,
    ),
]

# Special ids (no tokenizer is saved). ALBERT: <pad>=0, <unk>=1, [CLS]=2, [SEP]=3;
# T5: <pad>=0, </s>=1, <unk>=2, words >= 3.
ALBERT_SPECIAL = dict(pad=0, cls=2, sep=3, first_word=4)
T5_SPECIAL = dict(pad=0, eos=1, first_word=3)

HIDDEN_BATCH_LENGTHS = [13, 1, 30, 5, 2]
EMBEDDING_LENGTHS = [1, 6, 21]
T5_LONG = 60  # T5 has no position table: one long sequence, far past max_distance


def model_classes(family):
    import transformers as tf
    return {
        "albert": (tf.AlbertConfig, tf.AlbertModel),
        "t5": (tf.T5Config, tf.T5EncoderModel),
        "mt5": (tf.MT5Config, tf.MT5EncoderModel),
    }[family]


def hidden_size(fx):
    c = fx["config"]
    return c["hidden_size"] if fx["family"] == "albert" else c["d_model"]


def randomize(model, seed):
    """Overwrite every parameter from a seeded generator, in sorted-name order.

    Linear weights N(0, 1/fan_in), embedding tables and T5 relative-bias tables N(0, 1), norm
    weights 1 + 0.2 N(0, 1), biases 0.1 N(0, 1).
    """
    import torch
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            low = name.lower()
            if ("layernorm" in low or "layer_norm" in low) and name.endswith(".weight"):
                v = 1.0 + 0.2 * r
            elif name.endswith(".bias"):
                v = 0.1 * r
            elif "embeddings" in name or name.startswith("shared.") or "embed_tokens" in name \
                    or "relative_attention_bias" in name:
                v = r
            elif p.dim() == 2:
                v = r / (p.shape[1] ** 0.5)
            else:  # pragma: no cover
                raise ValueError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(v)


def write_st_layout(d, fx):
    import torch
    h = hidden_size(fx)
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    idx = 2
    if fx["dense"]:
        from sentence_transformers.base.modules.dense import Dense
        spec = fx["dense"]
        act = getattr(torch.nn, spec["activation"])()
        dense = Dense(h, spec["out_features"], bias=spec["bias"], activation_function=act)
        g = torch.Generator().manual_seed(fx["seed"] + 500)
        with torch.no_grad():
            w = dense.linear.weight
            w.copy_(torch.randn(w.shape, generator=g) / (h ** 0.5) * 2.0)
            if spec["bias"]:
                b = dense.linear.bias
                b.copy_(0.1 * torch.randn(b.shape, generator=g))
        path = f"{idx}_Dense"
        os.makedirs(os.path.join(d, path))
        dense.save(os.path.join(d, path))
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Dense"})
        idx += 1
    if fx["normalize"]:
        path = f"{idx}_Normalize"
        write_json(os.path.join(d, path, "config.json"), {})
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Normalize"})
    write_json(os.path.join(d, "modules.json"), modules)
    pool = {"word_embedding_dimension": h}
    for mode, key in [("cls", "pooling_mode_cls_token"), ("mean", "pooling_mode_mean_tokens"),
                      ("max", "pooling_mode_max_tokens"),
                      ("mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens"),
                      ("weightedmean", "pooling_mode_weightedmean_tokens"),
                      ("lasttoken", "pooling_mode_lasttoken")]:
        pool[key] = mode == fx["pooling"]
    pool["include_prompt"] = True
    write_json(os.path.join(d, "1_Pooling", "config.json"), pool)
    write_json(os.path.join(d, "sentence_bert_config.json"),
               {"max_seq_length": fx["max_seq_length"], "do_lower_case": False})


def make_sequence(fx, rng, length, pair):
    vocab = fx["config"]["vocab_size"]
    if fx["family"] == "albert":
        sp = ALBERT_SPECIAL
        word = lambda: rng.randrange(sp["first_word"], vocab)  # noqa: E731
        ids = [sp["cls"]] if length == 1 else [sp["cls"]] + [word() for _ in range(length - 2)] + [sp["sep"]]
        types = [0] * length
        if pair and length >= 7:
            cut = 1 + (length - 2) // 2
            ids[cut] = sp["sep"]
            types = [0] * (cut + 1) + [1] * (length - cut - 1)
        return ids, types
    sp = T5_SPECIAL
    ids = [rng.randrange(sp["first_word"], vocab) for _ in range(length - 1)] + [sp["eos"]]
    return ids, None


def hidden_reference(model, fx, seqs, types):
    import torch
    pad = fx["config"]["pad_token_id"]
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    tt = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        if types is not None:
            tt[i, : len(s)] = torch.tensor(types[i])
    kwargs = dict(input_ids=ids, attention_mask=mask)
    if types is not None:
        kwargs["token_type_ids"] = tt
    with torch.no_grad():
        out = model(**kwargs).last_hidden_state
    assert out.dtype == torch.float32
    return [f32_list(out[i, : len(s)]) for i, s in enumerate(seqs)]


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


def load_sentence_transformer(d, fx):
    import torch
    from sentence_transformers import SentenceTransformer
    st = SentenceTransformer(d, device="cpu",
                             model_kwargs={"dtype": torch.float32, "attn_implementation": "eager"})
    names = [type(m).__name__ for m in st]
    want = ["Transformer", "Pooling"] + (["Dense"] if fx["dense"] else []) \
        + (["Normalize"] if fx["normalize"] else [])
    if names != want:
        raise RuntimeError(f"{fx['name']}: sentence-transformers loaded {names}, expected {want}")
    hf = getattr(st[0], "auto_model", None) or getattr(st[0], "model")
    want_cls = model_classes(fx["family"])[1]
    if type(hf) is not want_cls:
        raise RuntimeError(f"{fx['name']}: sentence-transformers loaded {type(hf).__name__}")
    if fx["dense"]:
        act = type(st[2].activation_function).__name__
        if act != fx["dense"]["activation"]:
            raise RuntimeError(f"{fx['name']}: Dense activation {act}")
    return st


def embedding_reference(st, hf_model, ids):
    import torch
    x = torch.tensor([ids], dtype=torch.long)
    m = torch.ones_like(x)
    with torch.no_grad():
        emb = st.forward({"input_ids": x, "attention_mask": m})["sentence_embedding"][0]
        tok = hf_model(input_ids=x, attention_mask=m).last_hidden_state
        f2 = {"token_embeddings": tok, "attention_mask": m}
        for mod in list(st)[1:]:
            f2 = mod(f2)
        emb2 = f2["sentence_embedding"][0]
    diff = (emb - emb2).abs().max().item()
    if diff > 1e-6:
        raise RuntimeError(f"sentence-transformers and transformers disagree by {diff}")
    return f32_list(emb)


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)
    config_cls, model_cls = model_classes(fx["family"])
    d = os.path.join(out_root, fx["name"])
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)

    torch.manual_seed(fx["seed"])
    model = model_cls(config_cls(**fx["config"]))  # AlbertModel keeps its pooler: ignored
    randomize(model, fx["seed"])
    model.save_pretrained(d)
    if fx.get("prefix"):
        add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    write_st_layout(d, fx)

    ref = load_reference_model(d, fx)
    st = load_sentence_transformer(d, fx)
    rng = random.Random(fx["seed"])
    albert = fx["family"] == "albert"
    cases = []

    seqs, types = [], []
    for n in HIDDEN_BATCH_LENGTHS:
        s, t = make_sequence(fx, rng, n, pair=True)
        seqs.append(s)
        types.append(t)
    case = {"name": "padded_batch_" + "_".join(str(n) for n in HIDDEN_BATCH_LENGTHS),
            "kind": "hidden", "input_ids": seqs}
    if albert:
        case["token_type_ids"] = types
    case["expected"] = hidden_reference(ref, fx, seqs, types if albert else None)
    cases.append(case)

    n = fx["config"]["max_position_embeddings"] if albert else T5_LONG
    s, t = make_sequence(fx, rng, n, pair=True)
    case = {"name": f"{'max_positions' if albert else 'long'}_{n}", "kind": "hidden",
            "input_ids": [s]}
    if albert:
        case["token_type_ids"] = [t]
    case["expected"] = hidden_reference(ref, fx, [s], [t] if albert else None)
    cases.append(case)

    for n in EMBEDDING_LENGTHS:
        s, _ = make_sequence(fx, rng, n, pair=False)
        cases.append({"name": f"embedding_len_{n}", "kind": "embedding", "input_ids": s,
                      "expected": embedding_reference(st, ref, s)})

    extra = {
        "generator": {"script": SCRIPT, "fixture": fx["name"], "pooling": [fx["pooling"]],
                      "dense": fx["dense"], "normalize": fx["normalize"],
                      "storage_dtype": "float32", "versions": package_versions()},
    }
    write_golden(os.path.join(d, "golden.json"), TOL, cases, extra)
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"))
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
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
