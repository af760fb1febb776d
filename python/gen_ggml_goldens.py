#!/usr/bin/env python3
"""Regenerate tests/fixtures/ggml/blocks.json: ggml block formats dequantized (and, where
`gguf.quants` has a numpy quantizer, quantized) by the `gguf` package, the reference the Rust
dequantizers in crates/kin-infer-core/src/kernels/ggml.rs are held to bit for bit.

    pip install gguf==0.19.0 numpy==2.4.6   # no torch
    python python/gen_ggml_goldens.py [--out tests/fixtures/ggml/blocks.json]

Fixed seed: reruns are byte-identical. Per type, `cases` holds

- `kind: "dequantize"`: random blocks (every code byte random; each f16 scale or minimum a
  random finite value, some of them f16 subnormals, so widening is exercised) and
  `gguf.quants.dequantize`'s f32 values;
- `kind: "quantize"` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, the types with a numpy quantizer): random
  f32 rows (one of them constant, one all zero), `gguf.quants.quantize`'s bytes, and their
  dequantization: the blocks a real quantizer writes, and the goldens our quantizer (next) is
  held to.

- IQ4_NL (added later, its own seed): `dequantize` cases only (no quantizer is written).

- `kind: "quantize"` for Q4_K, Q5_K, Q6_K (no numpy quantizer in gguf): the bytes of
  llama.cpp's own `quantize_row_<type>_ref` (ggml-quants.c), called through ctypes in the
  library of the `xllamacpp` wheel (its CPU build of llama.cpp), on random rows (a zero row, a
  constant row, one with outliers), from a second fixed seed so the cases above keep their
  bytes. Needs `pip install xllamacpp` (version recorded in `versions`).

Bytes and f32 values are lowercase hex of their little-endian storage.
"""

import argparse
import json
import os
from importlib import metadata

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_OUT = os.path.join(HERE, "..", "tests", "fixtures", "ggml", "blocks.json")

# Byte offsets of each block's f16 fields (scales and minimums), per ggml-common.h.
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
    T.IQ4_NL: [0],
}
QUANTIZABLE = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
ELEMENT = {T.F32: np.float32, T.F16: np.float16, T.BF16: None}


def half_values(rng, n):
    """Finite f16 values: normal ones of either sign and a few subnormals."""
    v = (rng.standard_normal(n) * 0.05).astype(np.float16)
    sub = rng.random(n) < 0.15
    v[sub] = (rng.integers(1, 1024, size=int(sub.sum())) * np.float64(2.0 ** -24)).astype(np.float16)
    return v


def random_blocks(rng, t, n_blocks):
    block_len, block_bytes = gguf.GGML_QUANT_SIZES[t]
    if t == T.F32:
        return (rng.standard_normal(n_blocks) * 3).astype(np.float32).view(np.uint8)
    if t == T.F16:
        return half_values(rng, n_blocks).view(np.uint8)
    if t == T.BF16:
        f = (rng.standard_normal(n_blocks) * 3).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8)
    raw = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    for off in HALF_FIELDS[t]:
        raw[:, off:off + 2] = half_values(rng, n_blocks).view(np.uint8).reshape(n_blocks, 2)
    return raw.reshape(-1)


def case_dequantize(t, blocks):
    values = quants.dequantize(blocks, t).astype(np.float32)
    return {"kind": "dequantize", "blocks": blocks.tobytes().hex(), "values": values.tobytes().hex()}


def case_quantize(rng, t, rows, row_len):
    src = (rng.standard_normal((rows, row_len)) * 2).astype(np.float32)
    src[0, :] = 0.0
    src[1, :] = np.float32(1.25)
    q = quants.quantize(src, t)
    deq = quants.dequantize(q, t).astype(np.float32)
    return {
        "kind": "quantize", "rows": rows, "row_len": row_len,
        "source": src.tobytes().hex(), "blocks": q.tobytes().hex(), "values": deq.tobytes().hex(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=DEFAULT_OUT)
    a = ap.parse_args()
    rng = np.random.default_rng(20261201)
    types = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
             T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
    out = {
        "format": "kin-infer-ggml-golden/1",
        "generator": "python/gen_ggml_goldens.py",
        "versions": {"gguf": metadata.version("gguf"), "numpy": np.__version__},
        "types": [],
    }
    for t in types:
        block_len, block_bytes = gguf.GGML_QUANT_SIZES[t]
        n_blocks = 24 if block_len == 1 else (12 if block_len == 32 else 6)
        n = 256 if block_len == 1 else n_blocks
        cases = [case_dequantize(t, random_blocks(rng, t, n))]
        if t in QUANTIZABLE:
            cases.append(case_quantize(rng, t, 4, 64))
        out["types"].append({"type": t.name, "code": int(t), "block_len": block_len,
                             "block_bytes": block_bytes, "cases": cases})
    # The K-quants' reference quantizers: llama.cpp's C functions themselves.
    import ctypes
    import xllamacpp
    lib = ctypes.CDLL(xllamacpp.xllamacpp.__file__)
    out["versions"]["xllamacpp"] = metadata.version("xllamacpp")
    krng = np.random.default_rng(20261202)
    for entry in out["types"]:
        if entry["type"] not in ("Q4_K", "Q5_K", "Q6_K"):
            continue
        t = T[entry["type"]]
        fn = getattr(lib, f"quantize_row_{entry['type'].lower().replace('_k', '_K')}_ref")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
        fn.restype = None
        rows, row_len = 5, 512
        src = (krng.standard_normal((rows, row_len)) * 2).astype(np.float32)
        src[0, :] = 0.0
        src[1, :] = np.float32(1.25)
        src[2, ::37] *= 40.0
        src[3, :256] = np.abs(src[3, :256])
        src = np.ascontiguousarray(src)
        q = np.zeros(rows * row_len // 256 * entry["block_bytes"], dtype=np.uint8)
        fn(src.ctypes.data, q.ctypes.data, src.size)
        deq = quants.dequantize(q.reshape(rows, -1), t).astype(np.float32)
        entry["cases"].append({
            "kind": "quantize", "rows": rows, "row_len": row_len,
            "reference": f"llama.cpp quantize_row_{entry['type'].lower().replace('_k', '_K')}_ref (xllamacpp)",
            "source": src.tobytes().hex(), "blocks": q.tobytes().hex(), "values": deq.tobytes().hex(),
        })
    # Types added later draw from their own seed, so the cases above keep their bytes.
    for seed, t in [(20261204, T.IQ4_NL)]:
        block_len, block_bytes = gguf.GGML_QUANT_SIZES[t]
        blocks = random_blocks(np.random.default_rng(seed), t, 12)
        out["types"].append({"type": t.name, "code": int(t), "block_len": block_len,
                             "block_bytes": block_bytes, "cases": [case_dequantize(t, blocks)]})
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
