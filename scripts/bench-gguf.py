#!/usr/bin/env python3
"""Decode and prefill tokens/s from GGUF files: kin-infer against llama.cpp on the same file,
the same threads, in the same run (issue 13, "How fast").

Writes (once, cached under target/bench/gguf/) a random-weight LLaMA of about 100M parameters
(hidden 768, 12 layers, 12 heads, 4 KV heads, intermediate 2048, vocab 32000, tied head,
context 512: the shape scripts/bench-decode.py uses) as GGUF with numpy and the `gguf`
package (no torch): F32, and Q8_0 / Q4_0 / Q4_1 quantized by gguf.quants' reference
quantizers (norms F32, as llama.cpp's quantizer leaves them), and Q4_K_M- / Q5_K_M-style files
(Q4_K / Q5_K with Q6_K for the tied embedding and for attn_v / ffn_down in llama.cpp's "more
bits" layers) and a Q6_K file
(gguf.quants has no K-quant quantizer, so `kquant()` below rounds min/max per sub-block: not
llama.cpp's search, the same bytes per weight, and checked against gguf.quants' dequantizer). Then, for `--repeat`
interleaved rounds (best kept: this machine is shared and noisy), on each file:

- `kin-infer bench --model FILE.gguf --prompt-tokens P --decode-tokens D --threads T --json`,
  in both activation modes (docs/numerics.md): `--activations q8` (8-bit activations, integer
  block dots: llama.cpp's arithmetic) and `--activations f32` (quantized == dequantized F32);
  the F32 file runs f32 only;
- llama.cpp through the `xllamacpp` wheel (its CPU build): one completion of the same number
  of prompt tokens (random ids, prompt cache off) and D predicted tokens, `ignore_eos`,
  greedy; its own timings (`prompt_per_second`, `predicted_per_second`).

Prints per file: decode and prefill tokens/s of both, the ratio kin / llama.cpp, and the
decode bound (bytes of weights read per token / the read bandwidth `examples/mem_bandwidth`
measures with T threads). Needs `pip install gguf==0.19.0 numpy==2.4.6 xllamacpp` and

    cargo build --release -p kin-infer-cli -p kin-infer --examples
    python3 scripts/bench-gguf.py [--threads 2] [--repeat 3] [--json] [--llama-bench PATH]

`--llama-bench PATH` measures llama.cpp with the `llama-bench` of a build of your own instead
(its `-o json` means), e.g. one configured without AVX-512 when comparing `KIN_INFER_SIMD=avx2`:
the wheel's single build uses AVX-512 wherever the CPU has it.
"""

import argparse
import json
import os
import re
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "target", "bench", "gguf")
BIN = os.path.join(REPO, "target", "release", "kin-infer")
MEMBW = os.path.join(REPO, "target", "release", "examples", "mem_bandwidth")

C = dict(vocab=32000, hidden=768, layers=12, heads=12, kv=4, ff=2048, ctx=512)
FORMATS = ["f32", "q8_0", "q4_0", "q4_1", "q4_k_m", "q5_k_m", "q6_k"]


def kquant(x, qtype):
    """Q4_K, Q5_K or Q6_K blocks of the rows of `x` (ggml-common.h's layouts) by simple
    rounding: per sub-block scale (and Q4_K / Q5_K minimum) from its range, 6-bit / int8 (Q6_K)
    sub-scales relative to the block's f16 super-scale."""
    from gguf import GGMLQuantizationType as T
    from gguf import quants

    rows = x.shape[0]
    b = x.reshape(-1, 256).astype(np.float32)
    n = b.shape[0]
    f16 = lambda v: v.astype(np.float16)
    if qtype in (T.Q4_K, T.Q5_K):
        top = 15.0 if qtype == T.Q4_K else 31.0
        s = b.reshape(n, 8, 32)
        lo = np.minimum(s.min(axis=2), 0.0)
        scale = (s.max(axis=2) - lo) / top
        d = f16(scale.max(axis=1) / 63.0)
        dmin = f16((-lo).max(axis=1) / 63.0)
        df, dmf = d.astype(np.float32)[:, None], dmin.astype(np.float32)[:, None]
        sc = np.clip(np.round(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), 0, 63).astype(np.uint8)
        m = np.clip(np.round(np.divide(-lo, dmf, out=np.zeros_like(lo), where=dmf > 0)), 0, 63).astype(np.uint8)
        step = (df * sc)[:, :, None]
        q = np.clip(np.round(np.divide(s + (dmf * m)[:, :, None], step, out=np.zeros_like(s), where=step > 0)), 0, top).astype(np.uint8)
        scales = np.zeros((n, 12), np.uint8)
        scales[:, 0:4] = sc[:, 0:4] | ((sc[:, 4:8] >> 4) << 6)
        scales[:, 4:8] = m[:, 0:4] | ((m[:, 4:8] >> 4) << 6)
        scales[:, 8:12] = (sc[:, 4:8] & 15) | ((m[:, 4:8] & 15) << 4)
        # Q5_K: bit j of qh[l] is sub-block j's element l's fifth bit.
        qh = sum(((q[:, j, :] >> 4) & 1) << j for j in range(8)).astype(np.uint8)
        q = (q & 15).reshape(n, 4, 2, 32)
        qs = (q[:, :, 0, :] | (q[:, :, 1, :] << 4)).reshape(n, 128)
        head = [d.view(np.uint8).reshape(n, 2), dmin.view(np.uint8).reshape(n, 2), scales]
        blocks = np.concatenate(head + ([qh] if qtype == T.Q5_K else []) + [qs], axis=1)
    else:
        s = b.reshape(n, 16, 16)
        scale = np.abs(s).max(axis=2) / 31.0
        d = f16(scale.max(axis=1) / 127.0)
        df = d.astype(np.float32)[:, None]
        sc = np.clip(np.round(np.divide(scale, df, out=np.zeros_like(scale), where=df > 0)), -128, 127).astype(np.int8)
        step = (df * sc)[:, :, None]
        q = (np.clip(np.round(np.divide(s, step, out=np.zeros_like(s), where=step != 0)), -32, 31) + 32).astype(np.uint8)
        q = q.reshape(n, 2, 4, 32)
        ql = np.concatenate([q[:, :, 0] & 15 | (q[:, :, 2] & 15) << 4,
                             q[:, :, 1] & 15 | (q[:, :, 3] & 15) << 4], axis=2).reshape(n, 128)
        qh = (q[:, :, 0] >> 4 | (q[:, :, 1] >> 4) << 2 | (q[:, :, 2] >> 4) << 4
              | (q[:, :, 3] >> 4) << 6).reshape(n, 64)
        blocks = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(n, 2)], axis=1)
    out = blocks.astype(np.uint8).reshape(rows, -1)
    back = quants.dequantize(out, qtype).reshape(x.shape)
    err = np.abs(back - x).max() / np.abs(x).max()
    assert err < 0.2, f"kquant {qtype.name}: relative error {err}"
    return out


def write_model(path, qname):
    import gguf
    from gguf import GGMLQuantizationType as T
    from gguf import quants

    qtype = {"f32": None, "q8_0": T.Q8_0, "q4_0": T.Q4_0, "q4_1": T.Q4_1,
             "q4_k_m": T.Q4_K, "q5_k_m": T.Q5_K, "q6_k": T.Q6_K}[qname]
    # llama.cpp's general.file_type (enum llama_ftype): not the ggml type code.
    FILE_TYPE = {None: 0, T.Q4_0: 2, T.Q4_1: 3, T.Q8_0: 7, T.Q4_K: 15, T.Q5_K: 17, T.Q6_K: 18}
    rng = np.random.default_rng(1234)
    h, hd = C["hidden"], C["hidden"] // C["heads"]
    kvd = C["kv"] * hd

    def mat(rows, cols):
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float32)

    w = gguf.GGUFWriter(path, arch="llama")
    w.add_name("kin-bench-100m")
    w.add_context_length(C["ctx"])
    w.add_embedding_length(h)
    w.add_block_count(C["layers"])
    w.add_feed_forward_length(C["ff"])
    w.add_head_count(C["heads"])
    w.add_head_count_kv(C["kv"])
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_rope_dimension_count(hd)
    w.add_file_type(FILE_TYPE[qtype])
    tokens = [f"<t{i}>" for i in range(C["vocab"])]
    tokens[:6] = ["<unk>", "<s>", "</s>", "a", "b", "ab"]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([2, 3, 3, 1, 1, 1] + [4] * (C["vocab"] - 6))
    w.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)

    n = C["layers"]

    def more_bits(i):
        # llama.cpp's use_more_bits(i, n) for Q4_K_M's attn_v / ffn_down.
        return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2

    def add(name, t):
        if qtype is None or t.ndim != 2:
            w.add_tensor(name, t)
        elif qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
            six = name == "token_embd.weight" or (
                name.split(".")[-2] in ("attn_v", "ffn_down") and more_bits(int(name.split(".")[1])))
            kt = T.Q6_K if six else qtype
            w.add_tensor(name, kquant(t, kt), raw_dtype=kt)
        else:
            w.add_tensor(name, quants.quantize(t, qtype), raw_dtype=qtype)

    add("token_embd.weight", mat(C["vocab"], h))
    for i in range(C["layers"]):
        add(f"blk.{i}.attn_norm.weight", np.ones(h, np.float32))
        add(f"blk.{i}.attn_q.weight", mat(h, h))
        add(f"blk.{i}.attn_k.weight", mat(kvd, h))
        add(f"blk.{i}.attn_v.weight", mat(kvd, h))
        add(f"blk.{i}.attn_output.weight", mat(h, h))
        add(f"blk.{i}.ffn_norm.weight", np.ones(h, np.float32))
        add(f"blk.{i}.ffn_gate.weight", mat(C["ff"], h))
        add(f"blk.{i}.ffn_up.weight", mat(C["ff"], h))
        add(f"blk.{i}.ffn_down.weight", mat(h, C["ff"]))
    add("output_norm.weight", np.ones(h, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def weight_bytes_per_token(path):
    """Bytes of every weight matrix read per decoded token (the tied head once; the token
    embedding's one row is negligible), from the file's tensor sizes."""
    import gguf

    r = gguf.GGUFReader(path)
    return sum(int(t.n_bytes) for t in r.tensors)


def kin(path, args, activations):
    out = subprocess.run(
        [BIN, "bench", "--model", path, "--prompt-tokens", str(args.prompt),
         "--decode-tokens", str(args.decode), "--repeat", "1",
         "--threads", str(args.threads), "--activations", activations, "--json"],
        check=True, capture_output=True, text=True).stdout
    v = json.loads(out)
    assert v["activations"] == activations, v["activations"]
    return v["prefill_tokens_per_s_max"], v["decode_tokens_per_s_max"]


def kin_q8(path, args):
    return kin(path, args, "q8")


def kin_f32(path, args):
    return kin(path, args, "f32")


def llama_cpp(path, args):
    code = f"""
import json, sys, xllamacpp, numpy as np
p = xllamacpp.CommonParams()
p.model.path = {path!r}
p.n_ctx = {C['ctx']}
p.n_batch = {args.prompt}
p.cpuparams.n_threads = {args.threads}
p.cpuparams_batch.n_threads = {args.threads}
s = xllamacpp.Server(p)
ids = [int(x) for x in np.random.default_rng(7).integers(3, {C['vocab']}, {args.prompt})]
r = s.handle_completions({{"prompt": ids, "n_predict": {args.decode}, "temperature": 0,
                          "ignore_eos": True, "cache_prompt": False}})
t = r["timings"]
print("RESULT", json.dumps([t["prompt_per_second"], t["predicted_per_second"], t["predicted_n"]]))
"""
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    m = re.search(r"RESULT (.*)", out)
    pp, tg, n = json.loads(m.group(1))
    assert n == args.decode, f"llama.cpp predicted {n} tokens"
    return pp, tg


def llama_bench(path, args):
    """llama.cpp through a `llama-bench` binary of the user's own build (`--llama-bench`), e.g.
    one configured without AVX-512 to compare the AVX2 tiers: its mean prompt and generation
    tokens/s over one repetition of the same prompt and decode lengths and threads."""
    out = subprocess.run(
        [args.llama_bench, "-m", path, "-p", str(args.prompt), "-n", str(args.decode),
         "-t", str(args.threads), "-r", "1", "-o", "json"],
        check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)
    pp = next(t["avg_ts"] for t in tests if t["n_prompt"] == args.prompt and t["n_gen"] == 0)
    tg = next(t["avg_ts"] for t in tests if t["n_gen"] == args.decode and t["n_prompt"] == 0)
    return pp, tg


def bandwidth(threads):
    if not os.path.exists(MEMBW):
        return None
    out = subprocess.run([MEMBW], check=True, capture_output=True, text=True,
                         env={**os.environ, "KIN_INFER_THREADS": str(threads)}).stdout
    m = re.search(r"read ([0-9.]+) GB/s", out)
    return float(m.group(1)) * 1e9 if m else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--decode", type=int, default=64)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--llama-bench", metavar="PATH",
                    help="measure llama.cpp with this llama-bench binary instead of the "
                         "xllamacpp wheel (whose one build uses AVX-512 where the CPU has it)")
    args = ap.parse_args()
    peer = llama_bench if args.llama_bench else llama_cpp
    os.makedirs(OUT, exist_ok=True)
    formats = args.formats.split(",")
    paths = {}
    for f in formats:
        paths[f] = os.path.join(OUT, f"bench-100m.{f}.gguf")
        if not os.path.exists(paths[f]):
            print(f"writing {paths[f]}", file=sys.stderr)
            write_model(paths[f] + ".tmp", f)
            os.replace(paths[f] + ".tmp", paths[f])
    runners = {"kin q8": kin_q8, "kin f32": kin_f32, "llama.cpp": peer}
    best = {f: {name: [0.0, 0.0] for name in runners} for f in formats}
    bw = 0.0
    for r in range(args.repeat):
        bw = max(bw, bandwidth(args.threads) or 0.0)
        for f in formats:
            for name, fn in runners.items():
                if name == "kin q8" and f == "f32":
                    continue
                pp, tg = fn(paths[f], args)
                b = best[f][name]
                best[f][name] = [max(b[0], pp), max(b[1], tg)]
                print(f"round {r + 1} {f} {name}: prefill {pp:.1f} decode {tg:.1f} tok/s",
                      file=sys.stderr)
    rows = []
    for f in formats:
        # The F32 file has no quantized matrix: its f32 run is also its "q8" (auto) figure.
        q, k, l = best[f]["kin q8" if f != "f32" else "kin f32"], best[f]["kin f32"], best[f]["llama.cpp"]
        wb = weight_bytes_per_token(paths[f])
        bound = bw / wb if bw else None
        rows.append(dict(format=f, weight_mb=wb / 1e6, kin_prefill=q[0], kin_f32_prefill=k[0],
                         llama_prefill=l[0], kin_decode=q[1], kin_f32_decode=k[1],
                         llama_decode=l[1], decode_ratio=q[1] / l[1],
                         f32_decode_ratio=k[1] / l[1], prefill_ratio=q[0] / l[0],
                         f32_prefill_ratio=k[0] / l[0], decode_bound=bound,
                         bound_ratio=(bound / q[1]) if bound else None))
    if args.json:
        print(json.dumps(dict(threads=args.threads, read_bandwidth=bw, rows=rows)))
        return
    print(f"threads {args.threads}, read bandwidth {bw / 1e9:.1f} GB/s, best of {args.repeat}, "
          f"llama.cpp: {args.llama_bench or 'xllamacpp wheel'}")
    print("decode and prefill tok/s; kin q8 = --activations q8 (explicit; auto is f32 "
          "for now), kin f32 = --activations f32; bound = read bandwidth / weight bytes per token")
    print("| format | weights MB | decode kin q8 | kin f32 | llama.cpp | q8/llama | f32/llama | "
          "bound | bound/q8 | prefill kin q8 | kin f32 | llama.cpp | q8/llama | f32/llama |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        bound = f"{x['decode_bound']:.0f}" if x["decode_bound"] else "-"
        br = f"{x['bound_ratio']:.2f}" if x["bound_ratio"] else "-"
        print(f"| {x['format']} | {x['weight_mb']:.0f} | {x['kin_decode']:.1f} | "
              f"{x['kin_f32_decode']:.1f} | {x['llama_decode']:.1f} | {x['decode_ratio']:.2f}x | "
              f"{x['f32_decode_ratio']:.2f}x | {bound} | {br} | {x['kin_prefill']:.0f} | "
              f"{x['kin_f32_prefill']:.0f} | {x['llama_prefill']:.0f} | "
              f"{x['prefill_ratio']:.2f}x | {x['f32_prefill_ratio']:.2f}x |")


if __name__ == "__main__":
    main()
