"""kin_infer.Embedder: the CLI's vectors bit for bit, whatever the batch or threads; typed
exceptions for bad input; the GIL released while it computes."""

import json
import subprocess
import threading
import time

import numpy as np
import pytest

import kin_infer

TEXTS = [
    "fn main() { println!(\"hello\"); }",
    "def add(a, b):\n    return a + b",
    "",
    "SELECT id, name FROM users WHERE active = 1 ORDER BY name",
    "Ünïcödé ✓ 漢字 and emoji 🚀",
    "x" * 3000,  # truncated to the model's limit
] + [f"struct S{i} {{ field_{i}: u{8 * (1 + i % 4)} }}" for i in range(40)]


def cli_vectors(bin_, model, texts, tmp_path, extra=()):
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts), encoding="utf-8")
    out = subprocess.run(
        [str(bin_), "embed", "--model", str(model), "--jsonl", "--input", str(inp), *extra],
        check=True, capture_output=True, text=True,
    ).stdout
    rows = [json.loads(l)["embedding"] for l in out.splitlines()]
    # Shortest round-trip f32 literals: parsing as float64 then rounding gives the same f32.
    return np.array(rows, dtype=np.float64).astype(np.float32)


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(a.view(np.uint32), b.view(np.uint32))


@pytest.mark.parametrize("which", ["embed_tiny", "minilm"])
def test_encode_equals_the_cli_bit_for_bit(which, request, kin_infer_bin, tmp_path):
    model = request.getfixturevalue(which)
    want = cli_vectors(kin_infer_bin, model, TEXTS, tmp_path)
    e = kin_infer.Embedder(str(model))
    for bs in (1, 7, 32, 1000):
        got = e.encode(TEXTS, batch_size=bs)
        assert got.dtype == np.float32 and got.shape == (len(TEXTS), e.dim)
        assert same_bits(got, want), f"batch_size={bs}"
    assert same_bits(e.encode(TEXTS, show_progress_bar=True), want)
    one = kin_infer.Embedder(str(model), threads=1)
    assert same_bits(one.encode(TEXTS, batch_size=5), want)


def test_single_string_empty_list_and_dimensions(minilm, kin_infer_bin, tmp_path):
    e = kin_infer.Embedder(str(minilm))
    v = e.encode("hello world")
    assert v.shape == (384,) and v.dtype == np.float32
    assert same_bits(v, e.encode(["hello world"])[0])
    assert e.encode([]).shape == (0, 384)
    want = cli_vectors(kin_infer_bin, minilm, TEXTS[:8], tmp_path, ["--dimensions", "64"])
    assert same_bits(e.encode(TEXTS[:8], dimensions=64), want)
    m = kin_infer.Embedder(str(minilm), dimensions=64)
    assert m.dim == 64 and same_bits(m.encode(TEXTS[:8]), want)
    raw = cli_vectors(kin_infer_bin, minilm, TEXTS[:8], tmp_path, ["--no-normalize", "--pooling", "cls"])
    assert same_bits(kin_infer.Embedder(str(minilm), normalize=False, pooling="cls").encode(TEXTS[:8]), raw)


def test_properties_and_tokenize(minilm):
    e = kin_infer.Embedder(str(minilm), max_length=16)
    assert (e.dim, e.max_length, e.pooling, e.normalize, e.family) == (384, 16, "mean", True, "bert")
    assert e.get_sentence_embedding_dimension() == 384 and e.max_seq_length == 16
    assert e.numerics_version == kin_infer.NUMERICS_VERSION
    assert e.simd_tier in ("generic", "sse", "avx2", "avx512", "neon")
    t = e.tokenize(["hello world", "x " * 100])
    assert t["input_ids"][0] == [101, 7592, 2088, 102]
    assert len(t["input_ids"][1]) == 16 and t["attention_mask"][1] == [1] * 16
    assert "Embedder(" in repr(e)


def test_bad_input_raises_typed_exceptions(embed_tiny, tmp_path):
    with pytest.raises(kin_infer.ModelNotFoundError, match="not found"):
        kin_infer.Embedder(str(tmp_path / "nope"))
    with pytest.raises(FileNotFoundError):
        kin_infer.Embedder(str(tmp_path / "nope"))
    e = kin_infer.Embedder(str(embed_tiny))
    with pytest.raises(kin_infer.InvalidInputError):
        e.encode(["ok", 3])
    with pytest.raises(ValueError, match="batch_size"):
        e.encode(["a"], batch_size=0)
    with pytest.raises(kin_infer.InvalidInputError, match="dimensions"):
        e.encode(["a"], dimensions=10_000)
    with pytest.raises(kin_infer.InvalidInputError, match="pooling"):
        kin_infer.Embedder(str(embed_tiny), pooling="median")
    with pytest.raises(kin_infer.InvalidInputError, match="max length"):
        kin_infer.Embedder(str(embed_tiny), max_length=10**9)
    with pytest.raises(kin_infer.InvalidInputError):
        kin_infer.Embedder(str(embed_tiny), threads=0)
    # A model directory with damaged weights: an exception naming the file, no crash.
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("config.json", "tokenizer.json"):
        (bad / f).write_bytes((embed_tiny / f).read_bytes())
    (bad / "model.safetensors").write_bytes((embed_tiny / "model.safetensors").read_bytes()[:100])
    with pytest.raises(kin_infer.KinInferError, match="model.safetensors"):
        kin_infer.Embedder(str(bad))
    (bad / "config.json").write_text("{not json")
    with pytest.raises(kin_infer.KinInferError, match="config.json"):
        kin_infer.Embedder(str(bad))


def test_two_python_threads_encode_at_once_with_the_same_results(minilm):
    e = kin_infer.Embedder(str(minilm), threads=1)
    want = e.encode(TEXTS)
    results, errors = {}, []

    def work(k):
        try:
            results[k] = [e.encode(TEXTS, batch_size=3 + k) for _ in range(3)]
        except Exception as x:  # noqa: BLE001 - reported below
            errors.append(x)

    ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    for runs in results.values():
        for r in runs:
            assert same_bits(r, want)


def test_the_gil_is_released_while_encoding(minilm):
    """A pure-Python thread keeps running while another thread is inside encode."""
    e = kin_infer.Embedder(str(minilm), threads=1)
    texts = TEXTS * 6
    t0 = time.perf_counter()
    e.encode(texts)
    alone = time.perf_counter() - t0
    ticks, stop = [0], threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    time.sleep(0.05)
    before = ticks[0]
    t0 = time.perf_counter()
    e.encode(texts)
    during = ticks[0] - before
    elapsed = time.perf_counter() - t0
    stop.set()
    th.join()
    # Holding the GIL for the whole call would leave the spinner a few switch-interval
    # slices at most (a 5 ms interval: well under 1,000 increments).
    assert elapsed > 0.5 * alone
    assert during > 10_000, f"the Python thread advanced only {during} times in {elapsed:.2f} s"
