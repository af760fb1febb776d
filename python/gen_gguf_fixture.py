#!/usr/bin/env python3
"""Regenerate tests/fixtures/gguf/all_types.gguf and its sidecar all_types.json: a tiny GGUF
written by the `gguf` package's own writer (GGUFWriter), the reference our reader
(crates/kin-infer-core/src/io/gguf.rs) is held to, and the fuzz seeds under
fuzz/corpus/gguf_file/ (the file, and truncations of it).

    pip install gguf==0.19.0 numpy==2.4.6   # no torch
    python python/gen_gguf_fixture.py

The file holds one metadata pair of every GGUF value type (arrays of numbers and of strings
included) and one tensor of every ggml type the engine reads, each two rows of random blocks
(finite f16 scales), dims in ggml order `[row, rows]`. The sidecar lists, per tensor, its
type, dims and `gguf.quants.dequantize`'s f32 values (hex, little-endian); per metadata key its
value. Fixed seed: reruns are byte-identical.
"""

import hashlib
import json
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

from gen_ggml_goldens import random_blocks
from gguf_out import finish

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf")
SEEDS = os.path.join(ROOT, "fuzz", "corpus", "gguf_file")

TYPES = [T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0,
         T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_NL]


def main():
    rng = np.random.default_rng(7)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "all_types.gguf")
    w = gguf.GGUFWriter(path, arch="llama")
    meta = {
        "kin.test.u8": ("uint8", 200), "kin.test.i8": ("int8", -5),
        "kin.test.u16": ("uint16", 60000), "kin.test.i16": ("int16", -30000),
        "kin.test.u32": ("uint32", 4000000000), "kin.test.i32": ("int32", -2000000000),
        "kin.test.u64": ("uint64", 2 ** 40), "kin.test.i64": ("int64", -(2 ** 40)),
        "kin.test.f32": ("float32", 0.5), "kin.test.f64": ("float64", 0.1),
        "kin.test.bool": ("bool", True), "kin.test.str": ("string", "héllo"),
        "kin.test.ints": ("array", [1, 2, 3]), "kin.test.strs": ("array", ["a", "bc", ""]),
    }
    w.add_uint8("kin.test.u8", 200)
    w.add_int8("kin.test.i8", -5)
    w.add_uint16("kin.test.u16", 60000)
    w.add_int16("kin.test.i16", -30000)
    w.add_uint32("kin.test.u32", 4000000000)
    w.add_int32("kin.test.i32", -2000000000)
    w.add_uint64("kin.test.u64", 2 ** 40)
    w.add_int64("kin.test.i64", -(2 ** 40))
    w.add_float32("kin.test.f32", 0.5)
    w.add_float64("kin.test.f64", 0.1)
    w.add_bool("kin.test.bool", True)
    w.add_string("kin.test.str", "héllo")
    w.add_array("kin.test.ints", [1, 2, 3])
    w.add_array("kin.test.strs", ["a", "bc", ""])
    tensors = []
    for t in TYPES:
        block_len, block_bytes = gguf.GGML_QUANT_SIZES[t]
        row = 256 if block_len == QK_K else 64
        rows = 2
        n_blocks = row * rows // block_len
        blocks = random_blocks(rng, t, n_blocks)
        values = quants.dequantize(blocks, t).astype(np.float32).reshape(-1)
        name = f"t.{t.name.lower()}"
        if t == T.F32:
            w.add_tensor(name, blocks.view(np.float32).reshape(rows, row))
        elif t == T.F16:
            w.add_tensor(name, blocks.view(np.float16).reshape(rows, row))
        else:  # byte shape [rows, bytes per row], as gguf's writer takes quantized data
            w.add_tensor(name, blocks.reshape(rows, -1), raw_shape=(rows, row * block_bytes // block_len), raw_dtype=t)
        tensors.append({"name": name, "type": t.name, "dims": [row, rows],
                        "values": values.tobytes().hex()})
    finish(w)
    side = {"format": "kin-infer-gguf-fixture/1", "generator": "python/gen_gguf_fixture.py",
            "versions": {"gguf": metadata_version("gguf"), "numpy": np.__version__},
            "metadata": {k: {"type": ty, "value": v} for k, (ty, v) in meta.items()},
            "tensors": tensors}
    with open(os.path.join(OUT, "all_types.json"), "w") as f:
        json.dump(side, f, indent=1, ensure_ascii=False)
        f.write("\n")
    data = open(path, "rb").read()
    os.makedirs(SEEDS, exist_ok=True)
    for seed in (data, data[:24], data[:200], data[: len(data) // 2], data[:-1]):
        name = hashlib.sha1(seed).hexdigest()
        with open(os.path.join(SEEDS, name), "wb") as f:
            f.write(seed)
    print(f"wrote {path} ({len(data)} bytes) and 5 seeds")


QK_K = 256


def metadata_version(pkg):
    from importlib import metadata
    return metadata.version(pkg)


if __name__ == "__main__":
    main()
