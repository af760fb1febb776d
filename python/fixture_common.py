"""Helpers shared by the fixture generators (python/gen_fixtures*.py).

Everything here is deterministic, and the committed fixtures must stay byte-identical: the
generators' random streams depend on the order of the calls they make into these helpers.
Only `randomize` / `random_tensor` draw from torch (one `torch.randn` per parameter, in
sorted-name order, from the generator they are given), only `framed_sequence` /
`standard_cases` from the Python `random.Random` they are given (in the documented order).

- weights: `randomize` / `random_tensor` with a per-generator init rule (`init_value`),
  `add_prefix` (rewrite tensor names with a head-model prefix);
- files: `write_json`, `write_st_layout` (modules.json, 1_Pooling/config.json,
  sentence_bert_config.json, optional Dense and Normalize), `fresh_dir`;
- references: `load_reference_model`, `load_sentence_transformer`, `check_st_modules`,
  `padded_batch`, `hidden_reference`, `embedding_reference`;
- goldens: `framed_sequence`, `standard_cases` (the padded-batch `hidden` case, one long
  `hidden` case, the `embedding` cases), `write_fixture_golden`;
- `main`: the command line every generator shares (`--out DIR`, `--only NAME...`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from golden_json import f32_list, package_versions, write_golden  # noqa: E402

TOL = 1e-4

HIDDEN_BATCH_LENGTHS = [13, 1, 30, 5, 2]
EMBEDDING_LENGTHS = [1, 6, 21]

# BERT-style special ids (no tokenizer is saved): [PAD]=0, [UNK]=1, [CLS]=2, [SEP]=3.
BERT_SPECIAL = dict(pad=0, unk=1, cls=2, sep=3, first_word=4)

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


def import_torch():
    import torch  # noqa: F401
    import transformers  # noqa: F401
    import sentence_transformers  # noqa: F401
    return torch


# ---------------------------------------------------------------- weights

def init_value(name, r, *, is_norm, is_bias=lambda n: n.endswith(".bias"),
               is_embedding=lambda n: "embeddings" in n, conv=False):
    """The scale of one parameter, from a standard normal draw `r` of its shape.

    Scales keep activations O(1) so a wrong op shows up far above the tolerance: norm weights
    (gamma) 1 + 0.2 N(0,1), biases (incl. norm beta) 0.1 N(0,1), embedding tables N(0, 1),
    linear weights N(0, 1/fan_in), with `conv` also conv1d weights [out, in/groups, k]
    N(0, 1/(in/groups * k)). The predicates say what is a norm / bias / embedding.
    """
    if is_norm(name) and name.endswith(".weight"):
        return 1.0 + 0.2 * r
    if is_bias(name):
        return 0.1 * r
    if is_embedding(name):
        return r
    if r.dim() == 2:
        return r / (r.shape[1] ** 0.5)
    if conv and r.dim() == 3:
        return r / ((r.shape[1] * r.shape[2]) ** 0.5)
    raise ValueError(f"unexpected parameter {name} {tuple(r.shape)}")


def random_tensor(name, shape, g, init):
    """One float32 N(0,1) draw of `shape` from generator `g`, scaled by `init(name, r)`."""
    import torch
    return init(name, torch.randn(shape, generator=g, dtype=torch.float32))


def randomize(model, seed, init):
    """Overwrite every parameter from a generator seeded with `seed`, in sorted-name order,
    each as `random_tensor(name, shape, g, init)`."""
    import torch
    g = torch.Generator().manual_seed(seed)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name in sorted(params):
            p = params[name]
            p.copy_(random_tensor(name, p.shape, g, init))


def add_prefix(path, prefix):
    """Rewrite a single-file safetensors checkpoint with every tensor name prefixed."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file
    with safe_open(path, "pt") as f:
        meta = f.metadata()
    tensors = load_file(path)
    save_file({prefix + k: v for k, v in tensors.items()}, path, metadata=meta)


# ---------------------------------------------------------------- files

def fresh_dir(out_root, name):
    """`out_root/name`, emptied (removed and recreated)."""
    d = os.path.join(out_root, name)
    if os.path.exists(d):
        shutil.rmtree(d)
    os.makedirs(d)
    return d


def write_json(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, indent=2)
        f.write("\n")


def model_classes(names, family):
    """`family`'s (config class, model class) from transformers, given by name in `names`
    (imported only when a fixture is built, so the tables load without torch)."""
    import transformers
    config, model = names[family]
    return getattr(transformers, config), getattr(transformers, model)


def write_st_layout(d, fx, hidden=None, pooling=None, dense=None):
    """The sentence-transformers files of fixture `fx`: modules.json, 1_Pooling/config.json,
    sentence_bert_config.json, and when asked a Dense module and Normalize.

    `hidden` defaults to fx["config"]["hidden_size"], `pooling` (a list of modes) to
    fx["pooling"]; `fx["max_seq_length"]`, `fx["normalize"]` and `fx.get("normalize_dir",
    True)` are read from the fixture. `dense(path)`, when given, saves a Dense module into the
    directory `path` (created), which becomes module 2.
    """
    hidden = fx["config"]["hidden_size"] if hidden is None else hidden
    pooling = fx["pooling"] if pooling is None else pooling
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ]
    idx = 2
    if dense is not None:
        path = f"{idx}_Dense"
        os.makedirs(os.path.join(d, path))
        dense(os.path.join(d, path))
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Dense"})
        idx += 1
    if fx["normalize"]:
        path = f"{idx}_Normalize"
        modules.append({"idx": idx, "name": str(idx), "path": path,
                        "type": "sentence_transformers.models.Normalize"})
        if fx.get("normalize_dir", True):
            # sentence-transformers 2.x/3.x wrote an empty 2_Normalize/ (which git drops, e.g.
            # the all-MiniLM-L6-v2 wheel has none); newer versions write a config.json. Both
            # layouts are covered: bert_tiny has 2_Normalize/config.json, bert_multi_pool none.
            write_json(os.path.join(d, path, "config.json"), {})
    write_json(os.path.join(d, "modules.json"), modules)
    pool = {"word_embedding_dimension": hidden}
    for mode in POOL_FILE_ORDER:
        pool[POOL_KEYS[mode]] = mode in pooling
    pool["include_prompt"] = True
    write_json(os.path.join(d, "1_Pooling", "config.json"), pool)
    write_json(os.path.join(d, "sentence_bert_config.json"),
               {"max_seq_length": fx["max_seq_length"], "do_lower_case": False})


# ---------------------------------------------------------------- references

def load_reference_model(model_cls, d, name):
    """A transformers model from `d` in float32 with eager attention; it must load cleanly."""
    import torch
    model, info = model_cls.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                            output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        raise RuntimeError(f"{name}: checkpoint did not load cleanly: {bad}")
    model.eval()
    assert next(model.parameters()).dtype == torch.float32
    return model


def load_sentence_transformer(d):
    import torch
    from sentence_transformers import SentenceTransformer
    return SentenceTransformer(d, device="cpu",
                               model_kwargs={"dtype": torch.float32, "attn_implementation": "eager"})


def st_names_check(st, name, want):
    """The loaded sentence-transformers modules must be exactly `want` (class names)."""
    names = [type(m).__name__ for m in st]
    if names != want:
        raise RuntimeError(f"{name}: sentence-transformers loaded {names}, expected {want}")


def st_auto_model(st):
    """The transformers model inside a SentenceTransformer's Transformer module."""
    return getattr(st[0], "auto_model", None) or getattr(st[0], "model")


def check_st_modules(st, fx):
    """Transformer, Pooling (with fx's modes), Normalize when fx has it, all in float32.
    Returns the pooling modes in the order sentence-transformers concatenates them."""
    import torch
    want = ["Transformer", "Pooling"] + (["Normalize"] if fx["normalize"] else [])
    st_names_check(st, fx["name"], want)
    pool = st[1]
    modes = (pool.pooling_mode,) if isinstance(pool.pooling_mode, str) else tuple(pool.pooling_mode)
    st_order = [m for m in POOL_KEYS if m in fx["pooling"]]
    if list(modes) != st_order:
        raise RuntimeError(f"{fx['name']}: pooling modes {modes}, expected {st_order}")
    assert next(st_auto_model(st).parameters()).dtype == torch.float32, \
        "sentence-transformers must run in f32"
    return list(modes)


def padded_batch(seqs, types, pad):
    """Right-padded `input_ids`, `attention_mask`, `token_type_ids` (zeros when `types` is
    None) of a batch of sequences."""
    import torch
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad, dtype=torch.long)
    mask = torch.zeros((len(seqs), n), dtype=torch.long)
    tt = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
        if types is not None:
            tt[i, : len(s)] = torch.tensor(types[i])
    return ids, mask, tt


def unpadded_rows(out, seqs):
    """Per sequence, its rows of a float32 [batch, len, hidden] output, padding dropped."""
    import torch
    assert out.dtype == torch.float32
    return [f32_list(out[i, : len(s)]) for i, s in enumerate(seqs)]


def hidden_reference(model, pad, seqs, types):
    """One right-padded batch through a transformers model (token types passed only when
    `types` is not None); returns per sequence its unpadded rows."""
    import torch
    ids, mask, tt = padded_batch(seqs, types, pad)
    kwargs = dict(input_ids=ids, attention_mask=mask)
    if types is not None:
        kwargs["token_type_ids"] = tt
    with torch.no_grad():
        out = model(**kwargs).last_hidden_state
    return unpadded_rows(out, seqs)


def embedding_reference(st, hf_model, ids):
    """sentence-transformers' embedding of one unpadded sequence of ids.

    The reference is `SentenceTransformer.forward` (its Transformer, Pooling, Dense, Normalize
    modules) on the features a tokenizer would produce. As a cross-check, the same modules after
    the Transformer applied to our own transformers forward must agree.
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


# ---------------------------------------------------------------- goldens

def framed_sequence(rng, length, vocab, start, end, first_word, pair):
    """`length` ids framed like a BERT-style tokenizer frames them: start w... end, words drawn
    from `rng` in [first_word, vocab). With `pair` (and length >= 7) a middle `end` splits two
    segments, token types 0 for the first, 1 for the second; otherwise types are all 0."""
    if length == 1:
        ids = [start]
    else:
        ids = [start] + [rng.randrange(first_word, vocab) for _ in range(length - 2)] + [end]
    types = [0] * length
    if pair and length >= 7:
        cut = 1 + (length - 2) // 2  # position of the middle separator
        ids[cut] = end
        types = [0] * (cut + 1) + [1] * (length - cut - 1)
    return ids, types


def standard_cases(make_sequence, rng, hidden, embed, long_len, long_name, typed):
    """The golden cases every fixture has, drawing sequences from `rng` in this order:

    1. `padded_batch_13_1_30_5_2`: one `hidden` batch of HIDDEN_BATCH_LENGTHS (pairs);
    2. `long_name`: one `hidden` sequence of `long_len` tokens (a pair);
    3. `embedding_len_N` for N in EMBEDDING_LENGTHS (single segments).

    `make_sequence(rng, n, pair) -> (ids, types)`; `hidden(seqs, types) -> rows` gets the token
    types (and the case lists them) only when `typed`, else None; `embed(ids) -> vector`.
    """
    cases = []

    def hidden_case(name, seqs, types):
        case = {"name": name, "kind": "hidden", "input_ids": seqs}
        if typed:
            case["token_type_ids"] = types
        case["expected"] = hidden(seqs, types if typed else None)
        cases.append(case)

    seqs, types = [], []
    for n in HIDDEN_BATCH_LENGTHS:
        s, t = make_sequence(rng, n, pair=True)
        seqs.append(s)
        types.append(t)
    hidden_case("padded_batch_" + "_".join(str(n) for n in HIDDEN_BATCH_LENGTHS), seqs, types)

    s, t = make_sequence(rng, long_len, pair=True)
    hidden_case(long_name, [s], [t])

    for n in EMBEDDING_LENGTHS:
        s, _ = make_sequence(rng, n, pair=False)
        cases.append({"name": f"embedding_len_{n}", "kind": "embedding", "input_ids": s,
                      "expected": embed(s)})
    return cases


def write_fixture_golden(d, script, cases, **generator):
    """`d/golden.json` with tolerance TOL and a `generator` object: script, then the given
    keys in order (fixture, pooling, ...), then the package versions."""
    extra = {"generator": {"script": script, **generator, "versions": package_versions()}}
    write_golden(os.path.join(d, "golden.json"), TOL, cases, extra)


# ---------------------------------------------------------------- command line

def main(argv, doc, fixtures, generate, add_arguments=None, before=None):
    """The generators' command line: `--out DIR` (default tests/fixtures), `--only NAME...`.

    `add_arguments(ap)` adds more options; `before(args)` runs after parsing (it may exit)
    and before any fixture is generated. Prints each generated directory.
    """
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "fixtures"),
                    help="output root (default: tests/fixtures)")
    ap.add_argument("--only", nargs="*", help="fixture names to (re)generate")
    if add_arguments:
        add_arguments(ap)
    args = ap.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    if before:
        before(args)
    import_torch()
    names = {f["name"] for f in fixtures}
    if args.only and set(args.only) - names:
        ap.error(f"unknown fixture(s): {sorted(set(args.only) - names)}; known: {sorted(names)}")
    os.makedirs(args.out, exist_ok=True)
    for fx in fixtures:
        if args.only and fx["name"] not in args.only:
            continue
        print(generate(fx, args.out))
