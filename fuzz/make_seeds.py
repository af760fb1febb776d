#!/usr/bin/env python3
"""Seeds fuzz/corpus/<target>/ from the repository's real files (standard library only).

Every seed is written under the SHA-1 of its bytes, as libFuzzer names its units, so
re-running adds nothing twice. Big files are shrunk so that every seed stays under 64 KiB:
safetensors keep their names, dtypes and metadata with every dimension cut to at most 2,
golden files keep at most three cases with float rows cut to four values.

    python3 fuzz/make_seeds.py            # then: cargo +nightly fuzz cmin <target>
"""

import hashlib
import json
import os
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIX = os.path.join(ROOT, "tests", "fixtures")
DEC = os.path.join(ROOT, "tests", "decoder_fixtures")
INM = os.path.join(FIX, "inmotion")
OUT = os.path.join(ROOT, "fuzz", "corpus")
MAX = 64 * 1024
SEP = b"\0"

DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
               "I8": 1, "U8": 1, "BOOL": 1}

counts = {}


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > MAX:
        print(f"skip {target}: {len(data)} bytes", file=sys.stderr)
        return
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
    counts[target] = counts.get(target, 0) + 1


def read(path):
    with open(path, "rb") as f:
        return f.read()


def compact(v):
    return json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def dirs(base):
    return sorted(os.path.join(base, d) for d in os.listdir(base)
                  if os.path.isdir(os.path.join(base, d)))


def safetensors(header, data):
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def shrink_safetensors(raw):
    """The same tensors (names, dtypes, metadata) with every dimension cut to at most 2."""
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    out, data = {}, bytearray()
    if "__metadata__" in header:
        out["__metadata__"] = header.pop("__metadata__")
    for name, t in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        shape = [min(d, 2) for d in t["shape"]]
        size = DTYPE_BYTES.get(t["dtype"], 1)
        for d in shape:
            size *= d
        start = len(data)
        # A recognisable, finite pattern (small halves / floats are never NaN for these bytes).
        data += bytes((i * 7 + 1) % 64 for i in range(size))
        out[name] = {"dtype": t["dtype"], "shape": shape, "data_offsets": [start, len(data)]}
    return safetensors(out, bytes(data))


def trim_floats(v):
    """Float rows cut to four values, recursively; integer lists (ids) untouched."""
    if isinstance(v, list):
        if v and all(isinstance(x, float) for x in v):
            return v[:4]
        return [trim_floats(x) for x in v]
    if isinstance(v, dict):
        return {k: trim_floats(x) for k, x in v.items()}
    return v


def trim_golden(v):
    v = dict(v)
    if isinstance(v.get("cases"), list):
        v["cases"] = v["cases"][:3]
    return trim_floats(v)


def all_files(base, name):
    for d, _, files in sorted(os.walk(base)):
        if name in files:
            yield os.path.join(d, name)


def main():
    model_dirs = dirs(FIX) + dirs(DEC)
    artifact_dirs = [d for d in dirs(INM) if os.path.isfile(os.path.join(d, "meta.json"))]
    artifact_dirs += dirs(os.path.join(INM, "conformance"))

    # safetensors_header: every checkpoint shrunk, the small ones also as they are.
    put("safetensors_header", safetensors({}, b""))
    for p in all_files(ROOT + "/tests", "model.safetensors"):
        raw = read(p)
        put("safetensors_header", shrink_safetensors(raw))
        if len(raw) <= 8192:
            put("safetensors_header", raw)
    for d in model_dirs:
        for f in sorted(os.listdir(d)):
            if f.startswith("model-") and f.endswith(".safetensors"):
                put("safetensors_header", shrink_safetensors(read(os.path.join(d, f))))

    # shard_index: the real indexes alone, and with their shards shrunk (length-framed).
    for d in model_dirs:
        idx = os.path.join(d, "model.safetensors.index.json")
        if not os.path.isfile(idx):
            continue
        text = read(idx)
        put("shard_index", text)
        shards = sorted(set(json.loads(text)["weight_map"].values()))
        framed = b""
        for s in shards:
            body = shrink_safetensors(read(os.path.join(d, s)))
            framed += struct.pack("<I", len(body)) + body
        put("shard_index", text + SEP + framed)

    # config_json: every model config.
    for d in model_dirs:
        p = os.path.join(d, "config.json")
        if os.path.isfile(p):
            put("config_json", read(p))

    # st_config: modules.json, 1_Pooling/config.json, sentence_bert_config.json,
    # 2_Dense/config.json, tokenizer_config.json (module paths renamed to those).
    for d in model_dirs:
        mp = os.path.join(d, "modules.json")
        if not os.path.isfile(mp):
            continue
        modules = json.loads(read(mp))
        parts = [b""] * 5
        for m in modules:
            kind = m.get("type", "").rsplit(".", 1)[-1]
            cfg = os.path.join(d, m.get("path", ""), "config.json")
            if kind == "Pooling":
                if os.path.isfile(cfg):
                    parts[1] = read(cfg)
                m["path"] = "1_Pooling"
            elif kind == "Dense":
                if os.path.isfile(cfg):
                    parts[3] = read(cfg)
                m["path"] = "2_Dense"
        parts[0] = json.dumps(modules, indent=1).encode()
        sb = os.path.join(d, "sentence_bert_config.json")
        if os.path.isfile(sb):
            parts[2] = read(sb)
        put("st_config", SEP.join(parts))
        parts[4] = b'{"model_max_length": 512}'
        put("st_config", SEP.join(parts))
    put("st_config", SEP.join([b"", b"", b"", b"", b'{"model_max_length": 1e30}']))

    # golden_kin: every model golden file, trimmed; one inMotion file (a `classify` case).
    for d in model_dirs:
        p = os.path.join(d, "golden.json")
        if os.path.isfile(p):
            put("golden_kin", compact(trim_golden(json.loads(read(p)))))
    put("golden_kin", compact(trim_golden(json.loads(read(os.path.join(INM, "lejepa_fp32",
                                                                       "golden.json"))))))

    # golden_inmotion: the artifacts' golden files (the target validates against lejepa_fp32).
    for d in artifact_dirs:
        p = os.path.join(d, "golden.json")
        if os.path.isfile(p):
            v = json.loads(read(p))
            v["cases"] = v.get("cases", [])[:3]
            put("golden_inmotion", compact(v))

    # inmotion_meta: every meta.json.
    for d in artifact_dirs:
        put("inmotion_meta", read(os.path.join(d, "meta.json")))

    # inmotion_artifact: meta.json NUL model.safetensors (the small conformance artifacts),
    # also with weights_sha256 dropped so that mutated weights still get parsed.
    for d in artifact_dirs:
        meta = read(os.path.join(d, "meta.json"))
        weights = read(os.path.join(d, "model.safetensors"))
        if len(meta) + len(weights) + 1 > MAX:
            continue
        put("inmotion_artifact", meta + SEP + weights)
        v = json.loads(meta)
        if v.pop("weights_sha256", None) is not None:
            put("inmotion_artifact", compact(v).encode() + SEP + weights)

    # window_line / stream_line: golden inputs written as the CLI reads them.
    g = json.loads(read(os.path.join(INM, "lejepa_fp32", "golden.json")))
    rows = g["cases"][0]["input"]
    flat = [x for r in rows for x in r]
    put("window_line", "\n".join(", ".join(repr(x) for x in r) for r in rows) + "\n")
    put("window_line", "# window\n" + " ".join(repr(x) for x in flat))
    put("window_line", "\t".join(repr(x) for x in flat[:10]) + "\r\n# raw readings\n")
    put("window_line", "1e3,-2.5E-3,,+4,.5,  6.\n  # note\n-0\n")
    put("window_line", "1 nan\n")
    put("window_line", "1 2 abc\n")
    put("stream_line", "".join(" ".join(repr(x) for x in r) + "\n" for r in rows))
    put("stream_line", "# header\n\n" + ",".join(repr(x) for x in flat) + "\n1 2 3 4\n")
    put("stream_line", "1 2 3 4\r\n  \r\n-1e-3, 2e3 ,3,4\n1 2 3 inf\n")
    put("stream_line", " ".join(repr(x) for x in flat[:10]) + "\n" + "\n".join(
        repr(x) for x in flat[:10]))

    # embed_jsonl: JSON Lines and plain text as `embed` reads them.
    put("embed_jsonl", '{"id": "a", "text": "fn main() {}"}\n{"text": ""}\n\n'
        '{"id": 7, "text": "ünïcödé"}\n')
    put("embed_jsonl", '{"id": {"k": [1, 2.5, null]}, "text": "x"}\r\n{"id": null, "text": "y"}')
    put("embed_jsonl", '{"text": "ok"}\nnot json\n{"text": 5}\n{"id": 1}\n[1, 2]\n')
    put("embed_jsonl", "plain text line\nanother \\u00e9 line\r\n\n")
    put("embed_jsonl", b'{"text": "\xff\xfe"}\n\xc3\x28\n')
    put("embed_jsonl", '{"id": 1e400, "text": "big"}\n{"id": 18446744073709551616, "text": "n"}\n')

    for t in sorted(counts):
        print(f"{t}: {counts[t]} seeds written")


if __name__ == "__main__":
    main()
