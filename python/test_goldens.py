#!/usr/bin/env python3
"""Checks of the committed fixtures and golden files.

    python -m pytest python/test_goldens.py      # or
    python python/test_goldens.py

- `test_golden_format`: every golden file (tests/fixtures/*/golden.json,
  tests/decoder_fixtures/*/golden.json, tests/golden/*.json) follows kin-infer-golden/1 and its
  shapes match the model config (decoder `logits`: per sequence one row of `vocab_size` per
  input token; `generate`: `max_new_tokens` expected tokens per sequence); needs only the stdlib.
- `test_fixtures_regenerate`: with torch/transformers/sentence-transformers importable, each
  fixture (encoders under tests/fixtures/, decoders under tests/decoder_fixtures/) is regenerated into a temp dir and must equal the committed one (weights bit for bit,
  golden inputs exactly, golden numbers within 1e-6 so another CPU's float rounding passes).
  Skipped with a message when torch is absent.
- `test_minilm_golden_regenerates`: same for tests/golden/minilm.json when the MiniLM model has
  been fetched (scripts/fetch-minilm.sh); skipped otherwise.
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
FIXTURES = os.path.join(REPO, "tests", "fixtures")
DECODER_FIXTURES = os.path.join(REPO, "tests", "decoder_fixtures")
GOLDEN_DIR = os.path.join(REPO, "tests", "golden")
MINILM = os.path.join(REPO, "models", "all-MiniLM-L6-v2")
sys.path.insert(0, HERE)
from testkit import run_tests, skip  # noqa: E402

NUM_TOL = 1e-6
KINDS = {"hidden", "logits", "generate", "embedding", "classify"}


def have_torch_stack():
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
        import sentence_transformers  # noqa: F401
        import safetensors  # noqa: F401
    except ImportError as e:
        return str(e)
    return None


# ---------------------------------------------------------------- format (stdlib only)

def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def check_golden_doc(path, doc, hidden_size=None, embedding_dim=None, vocab_size=None):
    where = os.path.relpath(path, REPO)
    assert doc.get("format") == "kin-infer-golden/1", f"{where}: format"
    assert _is_num(doc.get("tol")) and doc["tol"] > 0, f"{where}: tol"
    cases = doc.get("cases")
    assert isinstance(cases, list) and cases, f"{where}: empty cases"
    names = set()
    for i, c in enumerate(cases):
        tag = f"{where} case {i} ({c.get('name')})"
        assert c.get("kind") in KINDS, f"{tag}: kind {c.get('kind')!r}"
        if "name" in c:
            assert c["name"] not in names, f"{tag}: duplicate name"
            names.add(c["name"])
        if c["kind"] == "hidden":
            ids, exp = c["input_ids"], c["expected"]
            assert ids and len(exp) == len(ids), tag
            if "token_type_ids" in c:
                assert [len(t) for t in c["token_type_ids"]] == [len(s) for s in ids], tag
            for s, rows in zip(ids, exp):
                assert s and all(isinstance(t, int) for t in s), tag
                assert len(rows) == len(s), f"{tag}: rows {len(rows)} != tokens {len(s)}"
                for r in rows:
                    assert hidden_size is None or len(r) == hidden_size, f"{tag}: row width {len(r)}"
                    assert all(_is_num(x) for x in r), tag
        elif c["kind"] == "embedding":
            assert ("text" in c) != ("input_ids" in c), f"{tag}: exactly one of text/input_ids"
            if "input_ids" in c:
                assert all(isinstance(t, int) for t in c["input_ids"]) and c["input_ids"], tag
            else:
                assert isinstance(c["text"], str), tag
            e = c["expected"]
            assert e and all(_is_num(x) for x in e), tag
            assert embedding_dim is None or len(e) == embedding_dim, f"{tag}: dim {len(e)}"
        elif c["kind"] == "logits":
            ids, exp = c["input_ids"], c["expected"]
            assert isinstance(ids, list) and ids and len(exp) == len(ids), f"{tag}: sequences"
            for s, rows in zip(ids, exp):
                assert s and all(isinstance(t, int) and not isinstance(t, bool) for t in s), tag
                assert vocab_size is None or all(0 <= t < vocab_size for t in s), f"{tag}: id out of vocab"
                assert len(rows) == len(s), f"{tag}: rows {len(rows)} != tokens {len(s)}"
                for r in rows:
                    assert vocab_size is None or len(r) == vocab_size, f"{tag}: row width {len(r)}"
                    assert all(_is_num(x) for x in r), tag
        elif c["kind"] == "generate":
            ids, exp, n = c["input_ids"], c["expected_tokens"], c.get("max_new_tokens")
            assert isinstance(n, int) and not isinstance(n, bool) and n > 0, f"{tag}: max_new_tokens"
            assert isinstance(ids, list) and ids and len(exp) == len(ids), f"{tag}: sequences"
            for s, new in zip(ids, exp):
                assert s and all(isinstance(t, int) and not isinstance(t, bool) for t in s), tag
                assert len(new) == n, f"{tag}: {len(new)} tokens != max_new_tokens {n}"
                for t in list(s) + list(new):
                    assert isinstance(t, int) and not isinstance(t, bool), tag
                    assert vocab_size is None or 0 <= t < vocab_size, f"{tag}: id {t} out of vocab"


def fixture_dirs():
    return sorted(d for d in glob.glob(os.path.join(FIXTURES, "*")) if os.path.isfile(os.path.join(d, "golden.json")))


def decoder_fixture_dirs():
    return sorted(d for d in glob.glob(os.path.join(DECODER_FIXTURES, "*"))
                  if os.path.isfile(os.path.join(d, "golden.json")))


def test_golden_format():
    dirs = fixture_dirs()
    assert dirs, "no fixtures under tests/fixtures"
    for d in dirs:
        cfg = json.load(open(os.path.join(d, "config.json")))
        pool = json.load(open(os.path.join(d, "1_Pooling", "config.json")))
        modes = sum(1 for k, v in pool.items() if k.startswith("pooling_mode_") and v is True)
        # T5/mT5 write d_model, nomic-bert (original layout) n_embd
        hidden = next(cfg[k] for k in ("hidden_size", "d_model", "n_embd") if k in cfg)
        dim = modes * hidden
        # sentence-transformers Dense modules change the embedding width.
        for m in json.load(open(os.path.join(d, "modules.json"))):
            if m["type"].rsplit(".", 1)[-1] == "Dense":
                dim = json.load(open(os.path.join(d, m["path"], "config.json")))["out_features"]
        p = os.path.join(d, "golden.json")
        check_golden_doc(p, json.load(open(p, encoding="utf-8")), hidden, dim)
    ddirs = decoder_fixture_dirs()
    assert ddirs, "no fixtures under tests/decoder_fixtures"
    for d in ddirs:
        cfg = json.load(open(os.path.join(d, "config.json")))
        vocab = cfg["vocab_size"]
        p = os.path.join(d, "golden.json")
        doc = json.load(open(p, encoding="utf-8"))
        check_golden_doc(p, doc, vocab_size=vocab)
        kinds = {c["kind"] for c in doc["cases"]}
        assert kinds <= {"logits", "generate"}, f"{os.path.relpath(p, REPO)}: kinds {sorted(kinds)}"
    for p in sorted(glob.glob(os.path.join(GOLDEN_DIR, "*.json"))):
        check_golden_doc(p, json.load(open(p, encoding="utf-8")))


# ---------------------------------------------------------------- regeneration (needs torch)

def _close(a, b, path="$"):
    """Structural equality; floats within NUM_TOL. Returns a description of the first difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(set(a) ^ set(b))}"
        for k in a:
            r = _close(a[k], b[k], f"{path}.{k}")
            if r:
                return r
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            r = _close(x, y, f"{path}[{i}]")
            if r:
                return r
        return None
    if isinstance(a, float) or isinstance(b, float):
        if not (_is_num(a) and _is_num(b)) or abs(a - b) > NUM_TOL:
            return f"{path}: {a!r} != {b!r}"
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


def _strip_versions(doc):
    doc = json.loads(json.dumps(doc))
    # Encoder goldens nest the package versions in a "generator" object; the decoder
    # generators write "generator" as a path string and "versions" at the top level.
    if isinstance(doc.get("generator"), dict):
        doc["generator"].pop("versions", None)
    doc.pop("versions", None)
    return doc


def _compare_dirs(committed, fresh):
    from safetensors import safe_open

    problems = []
    rel = lambda root: sorted(  # noqa: E731
        os.path.relpath(os.path.join(dp, f), root) for dp, _, fs in os.walk(root) for f in fs)
    a, b = rel(committed), rel(fresh)
    if a != b:
        return [f"file lists differ: {sorted(set(a) ^ set(b))}"]
    for f in a:
        pa, pb = os.path.join(committed, f), os.path.join(fresh, f)
        if f.endswith(".safetensors"):
            with safe_open(pa, "pt") as x, safe_open(pb, "pt") as y:
                if sorted(x.keys()) != sorted(y.keys()):
                    problems.append(f"{f}: tensor names differ")
                    continue
                for k in x.keys():
                    ta, tb = x.get_tensor(k), y.get_tensor(k)
                    if ta.dtype != tb.dtype or ta.shape != tb.shape or not bool((ta == tb).all()):
                        problems.append(f"{f}: tensor {k} differs")
                        break
        elif f.endswith(".json"):
            ja, jb = json.load(open(pa, encoding="utf-8")), json.load(open(pb, encoding="utf-8"))
            if f.endswith("golden.json"):
                ja, jb = _strip_versions(ja), _strip_versions(jb)
            else:
                for j in (ja, jb):
                    if isinstance(j, dict):
                        j.pop("transformers_version", None)
            r = _close(ja, jb)
            if r:
                problems.append(f"{f}: {r}")
        else:
            if open(pa, "rb").read() != open(pb, "rb").read():
                problems.append(f"{f}: bytes differ")
    return problems


# Decoder generators: each has main(["--out", DIR]) and a FIXTURES dict keyed by fixture name;
# they write DIR/<name>/ (config.json, model.safetensors, golden.json).
DECODER_GENERATORS = (
    "gen_fixtures_llama",
    "gen_fixtures_mistral_qwen2",
    "gen_fixtures_gpt2",
    "gen_fixtures_phi",
    "gen_fixtures_gemma",
    "gen_fixtures_llama_rope",
)


def _fixture_names(mod):
    fx = mod.FIXTURES
    return list(fx) if isinstance(fx, dict) else [f["name"] for f in fx]


@functools.lru_cache(maxsize=1)
def _regenerated_decoder_fixtures():
    import atexit
    import importlib
    import shutil

    tmp = tempfile.mkdtemp(prefix="kin-decoder-fixtures-")
    atexit.register(shutil.rmtree, tmp, True)
    for g in DECODER_GENERATORS:
        importlib.import_module(g).main(["--out", tmp])
    return tmp


@functools.lru_cache(maxsize=1)
def _regenerated_fixtures():
    import atexit
    import shutil

    import gen_fixtures
    import gen_fixtures_albert_t5
    import gen_fixtures_deberta
    import gen_fixtures_nomic_jina

    tmp = tempfile.mkdtemp(prefix="kin-fixtures-")
    atexit.register(shutil.rmtree, tmp, True)
    gen_fixtures.main(["--out", tmp])
    gen_fixtures_albert_t5.main(["--out", tmp])
    gen_fixtures_nomic_jina.main(["--out", tmp])
    gen_fixtures_deberta.main(["--out", tmp])
    return tmp


def test_fixtures_regenerate():
    missing = have_torch_stack()
    if missing:
        skip(f"torch stack not importable ({missing}); pip install -r python/requirements.txt")
    import gen_fixtures
    import gen_fixtures_albert_t5
    import gen_fixtures_deberta
    import gen_fixtures_nomic_jina

    fresh_root = _regenerated_fixtures()
    problems = []
    for fx in gen_fixtures.FIXTURES + gen_fixtures_albert_t5.FIXTURES + gen_fixtures_nomic_jina.FIXTURES + gen_fixtures_deberta.FIXTURES:
        committed = os.path.join(FIXTURES, fx["name"])
        if not os.path.isdir(committed):
            problems.append(f"{fx['name']}: not committed")
            continue
        problems += [f"{fx['name']}/{p}" for p in _compare_dirs(committed, os.path.join(fresh_root, fx["name"]))]

    import importlib

    fresh_dec = _regenerated_decoder_fixtures()
    generated = set()
    for g in DECODER_GENERATORS:
        for name in _fixture_names(importlib.import_module(g)):
            generated.add(name)
            committed = os.path.join(DECODER_FIXTURES, name)
            if not os.path.isdir(committed):
                problems.append(f"decoder_fixtures/{name}: not committed")
                continue
            problems += [f"decoder_fixtures/{name}/{p}"
                         for p in _compare_dirs(committed, os.path.join(fresh_dec, name))]
    orphans = sorted(set(os.path.basename(d) for d in decoder_fixture_dirs()) - generated)
    problems += [f"decoder_fixtures/{n}: committed but no generator writes it" for n in orphans]
    assert not problems, "fixtures differ from a fresh regeneration:\n  " + "\n  ".join(problems)


def test_minilm_golden_regenerates():
    missing = have_torch_stack()
    if missing:
        skip(f"torch stack not importable ({missing})")
    committed = os.path.join(GOLDEN_DIR, "minilm.json")
    if not os.path.isfile(os.path.join(MINILM, "model.safetensors")):
        skip(f"{os.path.relpath(MINILM, REPO)} not fetched; run scripts/fetch-minilm.sh")
    import gen_minilm_golden

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "minilm.json")
        gen_minilm_golden.main(["--model", MINILM, "--out", out])
        a = _strip_versions(json.load(open(committed, encoding="utf-8")))
        b = _strip_versions(json.load(open(out, encoding="utf-8")))
    r = _close(a, b)
    assert not r, f"tests/golden/minilm.json differs from a fresh run: {r}"


def main():
    return run_tests(globals())


if __name__ == "__main__":
    sys.exit(main())
