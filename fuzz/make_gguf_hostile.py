#!/usr/bin/env python3
"""Adds issue 30's hostile GGUF files to fuzz/corpus/gguf_file/ (standard library only).

Each is a committed fixture with its metadata or tensor directory edited the way the audit
edited real files: a tokenizer `tokenizers` panicked on (repeated tokens, a merge whose
result is not in the vocabulary), unknown token types, mismatched array lengths, special
ids past the vocabulary, float keys NaN / infinite / mistyped, EOS past the vocabulary,
tensors whose data overlap (an offset moved, a type widened). The replay test
(crates/kin-infer/tests/fuzz_corpus.rs) must see each refused without a panic; the tests
naming each error are crates/kin-infer/tests/gguf_hostile.rs and
crates/kin-infer-core/tests/gguf_reader.rs. The metadata-size cap
(`MAX_METADATA_BYTES`) needs a file far past 64 KiB, so it lives in gguf_reader.rs only.
Seeds are named by the SHA-1 of their bytes, as make_seeds.py names them.

    python3 fuzz/make_gguf_hostile.py
"""

import os
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_seeds import FIX, put, counts  # noqa: E402

GGUF = os.path.join(FIX, "gguf")
FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
       10: "<Q", 11: "<q", 12: "<d"}


class File:
    """A GGUF file as (key, type, value) pairs, the raw tensor directory and the data."""

    def __init__(self, path):
        b = open(path, "rb").read()
        self.at = 8
        self.b = b
        n_tensors, n_kv = struct.unpack_from("<QQ", b, 8)
        self.at = 24
        self.meta = []
        for _ in range(n_kv):
            key = self.str()
            ty = self.u(4)
            self.meta.append([key, ty, self.value(ty)])
        self.dir = []
        for _ in range(n_tensors):
            name = self.str()
            n_dims = self.u(4)
            dims = [self.u(8) for _ in range(n_dims)]
            self.dir.append([name, dims, self.u(4), self.u(8)])
        align = dict((k, v) for k, _, v in self.meta).get("general.alignment", 32)
        self.data = b[-(-self.at // align) * align:]

    def u(self, n):
        v = int.from_bytes(self.b[self.at:self.at + n], "little")
        self.at += n
        return v

    def str(self):
        n = self.u(8)
        s = self.b[self.at:self.at + n].decode()
        self.at += n
        return s

    def value(self, ty):
        if ty == 8:
            return self.str()
        if ty == 9:
            et, n = self.u(4), self.u(8)
            return (et, [self.value(et) for _ in range(n)])
        (v,) = struct.unpack_from(FMT[ty], self.b, self.at)
        self.at += struct.calcsize(FMT[ty])
        return v

    def set(self, key, ty, value):
        for m in self.meta:
            if m[0] == key:
                m[1], m[2] = ty, value
                return self
        self.meta.append([key, ty, value])
        return self

    def get(self, key):
        return next(v for k, _, v in self.meta if k == key)

    def bytes(self):
        def s(x):
            x = x.encode()
            return struct.pack("<Q", len(x)) + x

        def val(ty, v):
            if ty == 8:
                return s(v)
            if ty == 9:
                et, items = v
                return struct.pack("<IQ", et, len(items)) + b"".join(val(et, i) for i in items)
            return struct.pack(FMT[ty], v)

        out = b"GGUF" + struct.pack("<IQQ", 3, len(self.dir), len(self.meta))
        for k, ty, v in self.meta:
            out += s(k) + struct.pack("<I", ty) + val(ty, v)
        for name, dims, ty, off in self.dir:
            out += s(name) + struct.pack("<I", len(dims))
            out += b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ty, off)
        out += b"\0" * (-len(out) % 32)
        return out + self.data


def f(name):
    return File(os.path.join(GGUF, name))


def main():
    bpe, spm, llama = "tokenizers/bpe_gpt-2.gguf", "tokenizers/spm_llama.gguf", "decoders/llama_gqa.q4_0.gguf"
    nan, inf = float("nan"), float("inf")
    out = []
    # Issue 30's panic: repeated tokens and a merge whose result is not a token.
    out.append(f(bpe).set("tokenizer.ggml.tokens", 9, (8, ["a"] * 128))
               .set("tokenizer.ggml.token_type", 9, (5, [1] * 128))
               .set("tokenizer.ggml.merges", 9, (8, ["a a"])))
    g = f(bpe)
    g.get("tokenizer.ggml.merges")[1].insert(3, "\u0120 zzz")
    out.append(g)
    for src, bad in [(bpe, 9), (spm, -1)]:
        g = f(src)
        types = g.get("tokenizer.ggml.token_type")[1]
        types[7] = bad
        out.append(g.set("tokenizer.ggml.token_type", 9, (5, types)))
    g = f(spm)
    g.get("tokenizer.ggml.token_type")[1].pop()
    out.append(g)
    out.append(f(bpe).set("tokenizer.ggml.scores", 9, (6, [0.0] * 3)))
    out.append(f(spm).set("tokenizer.ggml.unknown_token_id", 4, 500))
    # Float keys and EOS of a whole decoder (its tokenizer too).
    for key, ty, v in [("llama.rope.freq_base", 6, nan), ("llama.rope.freq_base", 6, inf),
                       ("llama.rope.freq_base", 4, 1000000),
                       ("llama.attention.layer_norm_rms_epsilon", 6, nan),
                       ("tokenizer.ggml.eos_token_id", 4, 4096)]:
        out.append(f(llama).set(key, ty, v))
    out.append(f(llama).set("llama.rope.scaling.type", 8, "linear")
               .set("llama.rope.scaling.factor", 6, nan))
    # Tensor data overlapping: a type widened (F16 to F32, Q4_0 to Q8_0), an offset moved.
    for name, wider in [("t.f16", 0), ("t.q4_0", 8)]:
        g = f("all_types.gguf")
        next(t for t in g.dir if t[0] == name)[2] = wider
        out.append(g)
    g = f(llama)
    g.dir[1][3] = g.dir[0][3]
    out.append(g)
    for g in out:
        put("gguf_file", g.bytes())
    print(counts)


if __name__ == "__main__":
    main()
