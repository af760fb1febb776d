#!/usr/bin/env python3
"""Paired no-regression benchmark: two builds of the `kin-infer` CLI, interleaved in one run.

For a change that must cost no speed (issue 11, the compute seam), the only baseline that means
anything on a shared, noisy machine is the previous build measured in the same session, pair
by pair. This runs, for `--rounds` rounds, each figure on the base binary and the new one in
turn (the order alternating per round), and prints the best of each and new/base:

- embed: all-MiniLM-L6-v2 (scripts/fetch-minilm.sh) over the benchmark corpus
  (python/gen_bench_corpus.py: 512 code snippets; needs `tokenizers`), batch 32:
  `bench --model M --input CORPUS --batch-size 32 --repeat 1 --json` -> texts/s;
- embed: a random-weight DeBERTa-v2 with the conv layer (MiniLM's size: hidden 384, 6 layers,
  12 heads, ffn 1536, 256 position buckets, conv kernel 3 in 2 groups; MiniLM's tokenizer and
  pooling files), the family whose attention bias and convolution are backend ops of their own,
  on the same corpus and command;
- prefill and decode: a random-weight LLaMA of about 100M parameters (the shape of
  scripts/bench-decode.py: hidden 768, 12 layers, 12 heads, 4 kv heads, intermediate 2048,
  vocab 32000, tied), written here with numpy in f32 and bf16 storage (no torch needed):
  `bench --model DIR --prompt-tokens 128 --decode-tokens 64 --repeat 1 --json` -> tokens/s.

    python3 scripts/bench-paired.py --base OLD/kin-infer --new target/release/kin-infer \\
        [--rounds 5] [--threads 2] [--json]

`KIN_INFER_SIMD` in the environment applies to both binaries (e.g. `KIN_INFER_SIMD=avx2`).
"""

import argparse
import json
import os
import struct
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "target", "bench", "paired")

LLAMA = dict(
    model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=32000,
    hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=4,
    intermediate_size=2048, max_position_embeddings=512, rms_norm_eps=1e-5,
    rope_theta=10000.0, tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
    hidden_act="silu",
)


def write_safetensors(path, tensors):
    """tensors: name -> (dtype string, shape, bytes)."""
    header, offset, blobs = {}, 0, []
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def build_llama(dtype):
    import numpy as np

    d = os.path.join(OUT, f"llama-{dtype}")
    stamp = os.path.join(d, "stamp")
    want = json.dumps(LLAMA, sort_keys=True) + dtype
    if os.path.exists(stamp) and open(stamp).read() == want:
        return d
    os.makedirs(d, exist_ok=True)
    c = LLAMA
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    hd = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    rng = np.random.default_rng(0)

    def tensor(*shape, ones=False):
        x = np.ones(shape, np.float32) if ones else \
            rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        if dtype == "bf16":
            bits = (x.view(np.uint32) + 0x8000 >> 16).astype(np.uint16)
            return ("BF16", shape, bits.tobytes())
        return ("F32", shape, x.tobytes())

    t = {"model.embed_tokens.weight": tensor(v, h), "model.norm.weight": tensor(h, ones=True)}
    for layer in range(c["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        for name, shape in [("self_attn.q_proj", (h, h)), ("self_attn.k_proj", (kv, h)),
                            ("self_attn.v_proj", (kv, h)), ("self_attn.o_proj", (h, h)),
                            ("mlp.gate_proj", (i, h)), ("mlp.up_proj", (i, h)),
                            ("mlp.down_proj", (h, i))]:
            t[f"{p}.{name}.weight"] = tensor(*shape)
        for n in ["input_layernorm", "post_attention_layernorm"]:
            t[f"{p}.{n}.weight"] = tensor(h, ones=True)
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    cfg = dict(c, torch_dtype="bfloat16" if dtype == "bf16" else "float32")
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(stamp, "w") as f:
        f.write(want)
    return d


DEBERTA = dict(
    model_type="deberta-v2", architectures=["DebertaV2Model"], vocab_size=30522,
    hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
    max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-7, hidden_act="gelu",
    relative_attention=True, position_buckets=256, max_relative_positions=512,
    pos_att_type=["p2c", "c2p"], position_biased_input=False, norm_rel_ebd="layer_norm",
    share_att_key=True, conv_kernel_size=3, conv_groups=2, conv_act="gelu", pad_token_id=0,
)


def build_deberta(minilm):
    import shutil

    import numpy as np

    d = os.path.join(OUT, "deberta-v2-conv")
    stamp = os.path.join(d, "stamp")
    want = json.dumps(DEBERTA, sort_keys=True)
    if os.path.exists(stamp) and open(stamp).read() == want:
        return d
    os.makedirs(d, exist_ok=True)
    c = DEBERTA
    h, i, v = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    rng = np.random.default_rng(1)

    def tensor(*shape, ones=False, zeros=False):
        if ones or zeros:
            x = (np.ones if ones else np.zeros)(shape, np.float32)
        else:
            x = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
        return ("F32", shape, x.tobytes())

    def ln(name):
        return {f"{name}.weight": tensor(h, ones=True), f"{name}.bias": tensor(h, zeros=True)}

    t = {"embeddings.word_embeddings.weight": tensor(v, h),
         "embeddings.token_type_embeddings.weight": tensor(2, h),
         "embeddings.position_embeddings.weight": tensor(c["max_position_embeddings"], h),
         "encoder.rel_embeddings.weight": tensor(2 * c["position_buckets"], h),
         "encoder.conv.conv.weight": tensor(h, h // c["conv_groups"], c["conv_kernel_size"]),
         "encoder.conv.conv.bias": tensor(h, zeros=True)}
    t.update(ln("embeddings.LayerNorm"))
    t.update(ln("encoder.LayerNorm"))
    t.update(ln("encoder.conv.LayerNorm"))
    for layer in range(c["num_hidden_layers"]):
        p = f"encoder.layer.{layer}"
        for name, (o, k) in [("attention.self.query_proj", (h, h)),
                             ("attention.self.key_proj", (h, h)),
                             ("attention.self.value_proj", (h, h)),
                             ("attention.output.dense", (h, h)),
                             ("intermediate.dense", (i, h)), ("output.dense", (h, i))]:
            t[f"{p}.{name}.weight"] = tensor(o, k)
            t[f"{p}.{name}.bias"] = tensor(o, zeros=True)
        t.update(ln(f"{p}.attention.output.LayerNorm"))
        t.update(ln(f"{p}.output.LayerNorm"))
    write_safetensors(os.path.join(d, "model.safetensors"), t)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(c, f, indent=1)
    for name in ["tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                 "modules.json", "sentence_bert_config.json"]:
        shutil.copy(os.path.join(minilm, name), d)
    shutil.copytree(os.path.join(minilm, "1_Pooling"), os.path.join(d, "1_Pooling"),
                    dirs_exist_ok=True)
    with open(stamp, "w") as f:
        f.write(want)
    return d


def run(binary, args):
    r = subprocess.run([binary, "bench", *args, "--json"], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{binary} bench {' '.join(args)} failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    minilm = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-minilm.sh")],
                            capture_output=True, text=True, check=True).stdout.strip()
    corpus = os.path.join(OUT, "corpus.txt")
    if not os.path.exists(corpus):
        subprocess.run([sys.executable, os.path.join(REPO, "python", "gen_bench_corpus.py"),
                        "--model", minilm, corpus], check=True)
    t = str(a.threads)
    cases = [("embed minilm texts/s", ["--model", minilm, "--input", corpus, "--batch-size", "32",
                                        "--repeat", "1", "--threads", t], ["texts_per_s_max"])]
    deberta = build_deberta(minilm)
    cases.append(("embed deberta-v2 texts/s", ["--model", deberta, "--input", corpus,
                                                "--batch-size", "32", "--repeat", "1",
                                                "--threads", t], ["texts_per_s_max"]))
    for dt in ["f32", "bf16"]:
        d = build_llama(dt)
        cases.append((f"llama-100M {dt}", ["--model", d, "--prompt-tokens", "128",
                                           "--decode-tokens", "64", "--repeat", "1",
                                           "--threads", t],
                      ["prefill_tokens_per_s_max", "decode_tokens_per_s_max"]))
    best = {}
    tier = None
    for r in range(a.rounds):
        for name, args, keys in cases:
            order = [("base", a.base), ("new", a.new)]
            if r % 2:
                order.reverse()
            for who, binary in order:
                out = run(binary, args)
                tier = out.get("simd_tier", tier)
                for k in keys:
                    key = (name, k.replace("_max", ""), who)
                    best[key] = max(best.get(key, 0.0), out[k])
        print(f"round {r + 1}/{a.rounds} done", file=sys.stderr)
    rows = []
    for name, _, keys in cases:
        for k in keys:
            k = k.replace("_max", "")
            b, n = best[(name, k, "base")], best[(name, k, "new")]
            rows.append({"case": name, "figure": k, "base": b, "new": n, "ratio": n / b})
    if a.json:
        print(json.dumps({"tier": tier, "threads": a.threads, "rounds": a.rounds, "rows": rows}))
        return
    print(f"tier {tier}, {a.threads} threads, best of {a.rounds} interleaved rounds")
    print(f"{'case':<22} {'figure':<26} {'base':>10} {'new':>10} {'new/base':>9}")
    for row in rows:
        print(f"{row['case']:<22} {row['figure']:<26} {row['base']:>10.1f} {row['new']:>10.1f} "
              f"{row['ratio']:>9.3f}")


if __name__ == "__main__":
    main()
