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

TOL = 1e-4

# Legacy sentence-transformers pooling keys, in the order sentence-transformers concatenates
# enabled modes (see sentence_transformers Pooling: cls, max, mean, mean_sqrt_len, weightedmean,
# lasttoken) -- NOT the order the keys appear in the JSON file.
POOL_KEYS = {
    "cls": "pooling_mode_cls_token",
    "max": "pooling_mode_max_tokens",
    "mean": "pooling_mode_mean_tokens",
    "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
    "weightedmean": "pooling_mode_weightedmean_tokens",
    "lasttoken": "pooling_mode_lasttoken",
}
# The order the keys are written in 1_Pooling/config.json (deliberately the same as the files
# sentence-transformers 2.x wrote: cls, mean, max, mean_sqrt_len, weightedmean, lasttoken).
POOL_FILE_ORDER = ["cls", "mean", "max", "mean_sqrt_len_tokens", "weightedmean", "lasttoken"]

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
        # written to the config in POOL_FILE_ORDER (cls, mean, max); sentence-transformers
        # concatenates as cls, max, mean.
        pooling=["cls", "mean", "max"],
        normalize=True,
        normalize_dir=False,
        max_seq_length=40,
    ),
]

# Special token ids of the fixtures (no tokenizer is saved; these follow the usual layouts).
BERT_SPECIAL = dict(pad=0, unk=1, cls=2, sep=3, first_word=4)
ROBERTA_SPECIAL = dict(bos=0, pad=1, eos=2, unk=3, first_word=4)

HIDDEN_BATCH_LENGTHS = [13, 1, 30, 5, 2]
EMBEDDING_LENGTHS = [1, 6, 21]


def import_torch():
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import sentence_transformers  # noqa: F401
    return torch


def model_classes(family):
    import transformers as tf
    return {
        "bert": (tf.BertConfig, tf.BertModel),
        "roberta": (tf.RobertaConfig, tf.RobertaModel),
        "xlm-roberta": (tf.XLMRobertaConfig, tf.XLMRobertaModel),
    }[family]


def randomize(model, seed):
    """Overwrite every parameter from a seeded generator, in sorted-name order.

    Scales keep activations O(1) so a wrong op shows up far above the tolerance:
    linear weights N(0, 1/fan_in), embedding tables N(0, 1), LayerNorm gamma 1 + 0.2 N(0,1),
    LayerNorm beta and every other bias 0.1 N(0,1).
    """
    import torch
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            r = torch.randn(p.shape, generator=g, dtype=torch.float32)
            if "LayerNorm" in name and name.endswith(".weight"):
                v = 1.0 + 0.2 * r
            elif name.endswith(".bias"):
                v = 0.1 * r
            elif "embeddings" in name:
                v = r
            elif p.dim() == 2:
                v = r / (p.shape[1] ** 0.5)
            else:  # pragma: no cover - no other parameter kinds in these encoders
                raise ValueError(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(v)


def add_prefix(path, prefix):
    """Rewrite a single-file safetensors checkpoint with every tensor name prefixed."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    tensors = load_file(path)
    save_file({prefix + k: v for k, v in tensors.items()}, path, metadata=meta)


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def write_st_layout(d, fx):
    hidden = fx["config"]["hidden_size"]
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    if fx["normalize"]:
        modules.append({"idx": 2, "name": "2", "path": "2_Normalize",
                        "type": "sentence_transformers.models.Normalize"})
        if fx.get("normalize_dir", True):
            # sentence-transformers 2.x/3.x wrote an empty 2_Normalize/ (which git drops, e.g.
            # the all-MiniLM-L6-v2 wheel has none); newer versions write a config.json. Both
            # layouts are covered: bert_tiny has 2_Normalize/config.json, bert_multi_pool none.
            write_json(os.path.join(d, "2_Normalize", "config.json"), {})
    write_json(os.path.join(d, "modules.json"), modules)
    pool = {"word_embedding_dimension": hidden}
    for mode in POOL_FILE_ORDER:
        pool[POOL_KEYS[mode]] = mode in fx["pooling"]
    pool["include_prompt"] = True
    write_json(os.path.join(d, "1_Pooling", "config.json"), pool)
    write_json(os.path.join(d, "sentence_bert_config.json"),
               {"max_seq_length": fx["max_seq_length"], "do_lower_case": False})


def make_sequence(fx, rng, length, pair):
    """A sequence of `length` ids framed like the family's tokenizer would frame it.

    BERT: [CLS] a... [SEP] (b... [SEP]) with token types 0 for segment a, 1 for segment b.
    RoBERTa/XLM-R: <s> ... </s>; no token types.
    """
    vocab = fx["config"]["vocab_size"]
    if fx["family"] == "bert":
        sp = BERT_SPECIAL
        start, end = sp["cls"], sp["sep"]
    else:
        sp = ROBERTA_SPECIAL
        start, end = sp["bos"], sp["eos"]
    word = lambda: rng.randrange(sp["first_word"], vocab)  # noqa: E731
    if length == 1:
        ids = [start]
    else:
        ids = [start] + [word() for _ in range(length - 2)] + [end]
    types = [0] * length
    if pair and fx["family"] == "bert" and length >= 7:
        cut = 1 + (length - 2) // 2  # position of the middle [SEP]
        ids[cut] = end
        types = [0] * (cut + 1) + [1] * (length - cut - 1)
    return ids, types


def max_len(fx):
    cfg = fx["config"]
    if fx["family"] == "bert":
        return cfg["max_position_embeddings"]
    # RoBERTa positions run padding_idx+1 .. padding_idx+len, all < max_position_embeddings.
    return cfg["max_position_embeddings"] - cfg["pad_token_id"] - 1


def hidden_reference(model, fx, seqs, types):
    """One right-padded batch through transformers; returns per sequence its unpadded rows."""
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
    assert next(model.parameters()).dtype == torch.float32
    return model


def load_sentence_transformer(d):
    import torch
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(d, device="cpu",
                               model_kwargs={"dtype": torch.float32, "attn_implementation": "eager"})


def embedding_reference(st, hf_model, ids):
    """sentence-transformers' embedding of one unpadded sequence of ids.

    The reference is `SentenceTransformer.forward` (its Transformer, Pooling, Normalize modules)
    on the features a tokenizer would produce. As a cross-check, the same Pooling/Normalize
    modules applied to our own transformers forward must agree.
    """
    import torch
    x = torch.tensor([ids], dtype=torch.long)
    m = torch.ones_like(x)
    with torch.no_grad():
        feats = st.forward({"input_ids": x, "attention_mask": m})
        emb = feats["sentence_embedding"][0]
        tok = hf_model(input_ids=x, attention_mask=m).last_hidden_state
        f2 = {"token_embeddings": tok, "attention_mask": m}
        for mod in list(st)[1:]:
            f2 = mod(f2)
        emb2 = f2["sentence_embedding"][0]
    diff = (emb - emb2).abs().max().item()
    if diff > 1e-6:
        raise RuntimeError(f"sentence-transformers and transformers disagree by {diff}")
    assert emb.dtype == torch.float32
    return f32_list(emb)


def check_st_modules(st, fx):
    names = [type(m).__name__ for m in st]
    want = ["Transformer", "Pooling"] + (["Normalize"] if fx["normalize"] else [])
    if names != want:
        raise RuntimeError(f"{fx['name']}: sentence-transformers loaded {names}, expected {want}")
    pool = st[1]
    modes = (pool.pooling_mode,) if isinstance(pool.pooling_mode, str) else tuple(pool.pooling_mode)
    st_order = [m for m in POOL_KEYS if m in fx["pooling"]]
    if list(modes) != st_order:
        raise RuntimeError(f"{fx['name']}: pooling modes {modes}, expected {st_order}")
    hf = getattr(st[0], "auto_model", None) or getattr(st[0], "model")
    import torch
    assert next(hf.parameters()).dtype == torch.float32, "sentence-transformers must run in f32"
    return list(modes)


def generate(fx, out_root):
    import torch
    torch.set_num_threads(1)  # reproducible reductions
    config_cls, model_cls = model_classes(fx["family"])
    d = os.path.join(out_root, fx["name"])
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)

    # 1. checkpoint
    torch.manual_seed(fx["seed"])
    cfg = config_cls(**fx["config"])
    model = model_cls(cfg)  # BertModel etc. keep their pooler; the engine must ignore it
    randomize(model, fx["seed"])
    dtype = getattr(torch, fx["dtype"])
    save_kwargs = {}
    if "max_shard_size" in fx:
        save_kwargs["max_shard_size"] = fx["max_shard_size"]
    model.to(dtype).save_pretrained(d, **save_kwargs)
    if fx.get("max_shard_size"):
        files = sorted(f for f in os.listdir(d) if f.endswith(".safetensors"))
        assert len(files) >= 2 and os.path.exists(os.path.join(d, "model.safetensors.index.json")), files
    if fx["prefix"]:
        add_prefix(os.path.join(d, "model.safetensors"), fx["prefix"])
    write_st_layout(d, fx)

    # 2. golden, always from what is on disk, widened to f32
    ref = load_reference_model(d, fx)
    st = load_sentence_transformer(d)
    st_modes = check_st_modules(st, fx)

    rng = random.Random(fx["seed"])
    is_bert = fx["family"] == "bert"
    cases = []

    seqs, types = [], []
    for n in HIDDEN_BATCH_LENGTHS:
        s, t = make_sequence(fx, rng, n, pair=True)
        seqs.append(s)
        types.append(t)
    case = {"name": "padded_batch_" + "_".join(str(n) for n in HIDDEN_BATCH_LENGTHS),
            "kind": "hidden", "input_ids": seqs}
    if is_bert:
        case["token_type_ids"] = types
    case["expected"] = hidden_reference(ref, fx, seqs, types if is_bert else None)
    cases.append(case)

    n = max_len(fx)
    s, t = make_sequence(fx, rng, n, pair=True)
    case = {"name": f"max_positions_{n}", "kind": "hidden", "input_ids": [s]}
    if is_bert:
        case["token_type_ids"] = [t]
    case["expected"] = hidden_reference(ref, fx, [s], [t] if is_bert else None)
    cases.append(case)

    for n in EMBEDDING_LENGTHS:
        s, _ = make_sequence(fx, rng, n, pair=False)
        cases.append({"name": f"embedding_len_{n}", "kind": "embedding", "input_ids": s,
                      "expected": embedding_reference(st, ref, s)})

    extra = {
        "generator": {"script": "python/gen_fixtures.py", "fixture": fx["name"],
                      "pooling": st_modes, "normalize": fx["normalize"],
                      "storage_dtype": fx["dtype"], "versions": package_versions()},
    }
    write_golden(os.path.join(d, "golden.json"), TOL, cases, extra)
    return d


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"),
                    help="output root (default: tests/fixtures)")
    ap.add_argument("--only", nargs="*", help="fixture names to (re)generate")
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import_torch()
    names = {f["name"] for f in FIXTURES}
    if args.only:
        unknown = set(args.only) - names
        if unknown:
            ap.error(f"unknown fixture(s): {sorted(unknown)}; known: {sorted(names)}")
    os.makedirs(args.out, exist_ok=True)
    for fx in FIXTURES:
        if args.only and fx["name"] not in args.only:
            continue
        d = generate(fx, args.out)
        print(d)


if __name__ == "__main__":
    main()
