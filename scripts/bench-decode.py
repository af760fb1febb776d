#!/usr/bin/env python3
"""Decode tokens/s against the memory bound, prefill against the engine's matmul throughput
on the same shapes (issue 3, "How fast").

Builds (with transformers, cached under target/bench/decode/) a random-weight LLaMA of about
100M parameters (hidden 768, 12 layers, 12 heads, 4 KV heads, intermediate 2048, vocab 32000,
tied embeddings so the head is the embedding table, context 512), once in f32 and once in
bf16 storage (kept bf16 in memory by the engine). Then, in `--repeat` interleaved rounds
(best of each kept, because this machine is shared and noisy):

- memory read bandwidth with the same thread count (`examples/mem_bandwidth`: a 1 GiB
  buffer summed in parallel; decode reads every weight once per token and writes almost
  nothing, so bytes read / read bandwidth is the bound);
- `kin-infer bench --model DIR --prompt-tokens 128 --decode-tokens 64 --repeat 1
  --threads T --json` on each model;
- `examples/matmul_bench` on the prefill's own products (KIN_BENCH_SHAPES=llama: 128 rows x
  fused q/k/v, o, fused gate/up, down), combined into one FLOP-weighted GFLOP/s figure.

Prints decode tokens/s next to the bound (weight bytes read per token / read bandwidth) and
the ratio measured time per token / bound time per token (target <= 1.3); prefill GFLOP/s
(layer matmuls for every prompt token, the head for the last row only, the causal attention
products) as a share of the matmul figure (target >= 70%); the bench process's peak RSS.

Needs torch + transformers + numpy for building the models (pip install -r
python/requirements.txt) and a built CLI and examples:

    cargo build --release -p kin-infer-cli -p kin-infer --examples
    python3 scripts/bench-decode.py [--threads 2] [--repeat 3] [--json]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(REPO, "target", "bench", "decode")
BIN = os.path.join(REPO, "target", "release", "kin-infer")

CONFIG = dict(
    vocab_size=32000, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
    num_key_value_heads=4, intermediate_size=2048, max_position_embeddings=512,
    rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
    bos_token_id=1, eos_token_id=2, pad_token_id=0, hidden_act="silu",
)
STAMP = "bench-decode/1 " + json.dumps(CONFIG, sort_keys=True)


def param_counts(c=CONFIG):
    h, L, v, ff = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    hd = h // c["num_attention_heads"]
    kv = c["num_key_value_heads"] * hd
    per_layer_mm = h * h + 2 * h * kv + h * h + 3 * h * ff  # q, k, v, o, gate, up, down
    layers_mm = L * per_layer_mm
    norms = L * 2 * h + h
    head = v * h  # tied: the embedding table is the head
    return dict(layers_matmul=layers_mm, norms=norms, head=head,
                total=layers_mm + norms + head + (0 if c["tie_word_embeddings"] else v * h))


def build(name, dtype):
    d = os.path.join(OUT, name)
    stamp = os.path.join(d, "STAMP")
    if os.path.isfile(stamp) and open(stamp).read() == STAMP + " " + dtype \
            and os.path.isfile(os.path.join(d, "model.safetensors")):
        return d
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = dict(CONFIG)
    theta = cfg.pop("rope_theta")
    config = LlamaConfig(**cfg, rope_parameters={"rope_type": "default", "rope_theta": theta},
                         attention_bias=False, mlp_bias=False)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    model = model.to(torch.bfloat16 if dtype == "bf16" else torch.float32)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    gc = os.path.join(d, "generation_config.json")
    if os.path.exists(gc):
        os.remove(gc)
    n = sum(p.numel() for p in model.parameters())
    open(stamp, "w").write(STAMP + " " + dtype)
    print(f"built {os.path.relpath(d, REPO)} ({n / 1e6:.1f}M params, {dtype})", file=sys.stderr)
    return d


def example(name, threads, **env):
    """Runs a release example of the kin-infer crate; its stdout."""
    path = os.path.join(REPO, "target", "release", "examples", name)
    if not os.path.isfile(path):
        sys.exit(f"{path} missing: cargo build --release -p kin-infer --examples")
    e = dict(os.environ, KIN_INFER_THREADS=str(threads), **env)
    r = subprocess.run([path], env=e, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{name} failed:\n{r.stderr[-2000:]}")
    return r.stdout


def read_bandwidth(threads):
    """Bytes/s read by `threads` threads streaming a 1 GiB buffer (best of 5)."""
    out = example("mem_bandwidth", threads)
    return float(re.search(r"read ([\d.]+) GB/s", out).group(1)) * 1e9


def run_bench(d, threads, repeat, prompt, decode):
    cmd = [BIN, "bench", "--model", d, "--prompt-tokens", str(prompt), "--decode-tokens", str(decode),
           "--repeat", str(repeat), "--threads", str(threads), "--json"]
    # Peak RSS: polled from /proc (VmHWM, reset at exec). wait4's ru_maxrss would carry over
    # this Python process's own peak across fork + exec on Linux.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    hwm = [0]

    def poll():
        while p.poll() is None:
            try:
                for line in open(f"/proc/{p.pid}/status"):
                    if line.startswith("VmHWM:"):
                        hwm[0] = max(hwm[0], int(line.split()[1]) * 1024)
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    th = threading.Thread(target=poll, daemon=True)
    th.start()
    out, err = p.communicate()
    th.join()
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err}")
    doc = json.loads(out.strip().splitlines()[-1])
    doc["peak_rss_bytes"] = hwm[0]
    return doc


LLAMA_SHAPES = None  # filled in main(): label -> multiply-adds per prefill


def matmul_gflops(threads, cold=False):
    """GFLOP/s per llama prefill shape (tier -> label -> GFLOP/s); `cold`: weights streamed
    from memory (labels end in " cold")."""
    out = example("matmul_bench", threads, KIN_BENCH_SHAPES="llama", KIN_BENCH_REPS="5",
                  KIN_BENCH_COLD="1" if cold else "0")
    res = {}
    for line in out.splitlines():
        m = re.match(r"(\S+)\s+(.+?)\s+([\d.]+) GFLOP/s$", line)
        if m:
            res.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3))
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--decode-tokens", type=int, default=64)
    ap.add_argument("--no-matmul", action="store_true", help="skip the matmul_bench comparison")
    ap.add_argument("--json", action="store_true", help="also print one JSON summary line")
    a = ap.parse_args()
    if not os.path.isfile(BIN):
        sys.exit(f"{BIN} missing: cargo build --release -p kin-infer-cli")

    dirs = {"f32": build("llama100m_f32", "f32"), "bf16": build("llama100m_bf16", "bf16")}
    pc = param_counts()
    # Bytes read per decoded token: every layer weight, the final norm, the head (= embedding
    # table, read once by the head matmul; the one embedding row looked up is negligible).
    read_params = pc["layers_matmul"] + pc["norms"] + pc["head"]

    h, ff, L = CONFIG["hidden_size"], CONFIG["intermediate_size"], CONFIG["num_hidden_layers"]
    kv = CONFIG["num_key_value_heads"] * h // CONFIG["num_attention_heads"]
    T = a.prompt_tokens
    # The layer products of one prefill, as matmul_bench labels them (128 rows).
    shapes = {f"llama {T}x{h}x{h + 2 * kv}": T * h * (h + 2 * kv), f"llama {T}x{h}x{h}": T * h * h,
              f"llama {T}x{h}x{2 * ff}": T * h * 2 * ff, f"llama {T}x{ff}x{h}": T * ff * h}

    bw, results, mm = 0.0, {}, {}
    for _ in range(a.repeat):
        bw = max(bw, read_bandwidth(a.threads))
        for k, d in dirs.items():
            r = run_bench(d, a.threads, 1, a.prompt_tokens, a.decode_tokens)
            best = results.get(k)
            if best is None:
                results[k] = r
            else:
                for f in ("decode_tokens_per_s_max", "prefill_tokens_per_s_max"):
                    best[f] = max(best[f], r[f])
                best["peak_rss_bytes"] = max(best["peak_rss_bytes"], r["peak_rss_bytes"])
        if not a.no_matmul:
            for cold in (False, True):
                for tier, t in matmul_gflops(a.threads, cold).items():
                    for label, g in t.items():
                        mm.setdefault(tier, {})[label] = max(g, mm.get(tier, {}).get(label, 0.0))

    tier = results["f32"].get("simd_tier")
    print(f"model: LLaMA {pc['total'] / 1e6:.1f}M params (layers' matmuls {pc['layers_matmul'] / 1e6:.1f}M, "
          f"head/embedding {pc['head'] / 1e6:.1f}M tied), prompt {T}, decode {a.decode_tokens}, "
          f"threads {a.threads}, {a.repeat} interleaved rounds (best kept), tier {tier}")
    print(f"memory read bandwidth ({a.threads} threads, 1 GiB parallel sum): {bw / 1e9:.1f} GB/s")
    print("bound = weight bytes read per token / read bandwidth; "
          "ratio = measured s/token / bound s/token (target <= 1.3)")
    summary = dict(params=pc, read_bw_bytes_per_s=bw, models={})
    print(f"{'storage':8} {'bytes/param':>11} {'decode tok/s':>12} {'bound tok/s':>11} {'ratio':>6} "
          f"{'prefill tok/s':>13} {'prefill GFLOP/s':>15} {'peak RSS':>9}")
    hd = h // CONFIG["num_attention_heads"]
    # QK^T and PV over the causal triangle, every head, every layer.
    attn_flops = L * CONFIG["num_attention_heads"] * 2 * 2 * hd * (T * (T + 1) // 2)
    prefill_flops = 2 * pc["layers_matmul"] * T + 2 * pc["head"] + attn_flops
    for k, r in results.items():
        per = 4 if k == "f32" else 2
        dec = r["decode_tokens_per_s_max"]
        pre = r["prefill_tokens_per_s_max"]
        bound = bw / (per * read_params)
        pgf = prefill_flops * pre / T / 1e9
        print(f"{k:8} {per:11d} {dec:12.1f} {bound:11.1f} {bound / dec:6.2f} "
              f"{pre:13.1f} {pgf:15.1f} {r['peak_rss_bytes'] / 2**20:7.0f}Mi")
        summary["models"][k] = dict(bench=r, bound_tokens_per_s=bound, ratio=bound / dec,
                                    prefill_gflops=pgf)
    print(f"  (weights read per token: {4 * read_params / 2**20:.0f} MiB f32, "
          f"{2 * read_params / 2**20:.0f} MiB bf16)")
    t = mm.get(tier) or (next(iter(mm.values())) if mm else None)
    if t and all(s in t for s in shapes):
        macs = sum(shapes.values())
        for suffix, what in (("", "weights in cache (hot loop)"),
                             (" cold", "weights streamed from memory, as in a forward pass")):
            if not all(s + suffix in t for s in shapes):
                continue
            # FLOP-weighted: the time the layer products take at their measured rates.
            ref = 2 * macs / sum(2 * w / (t[s + suffix] * 1e9) for s, w in shapes.items()) / 1e9
            print(f"matmul_bench ({tier}, {a.threads} threads, best, {what}): "
                  + ", ".join(f"{s} {t[s + suffix]:.1f}" for s in shapes)
                  + f" GFLOP/s; FLOP-weighted {ref:.1f}")
            for k in results:
                pgf = summary["models"][k]["prefill_gflops"]
                print(f"  prefill {k}: {pgf:.1f} GFLOP/s = {100 * pgf / ref:.0f}% of it; target >= 70%")
                summary["models"][k]["prefill_vs_matmul" + suffix.replace(" ", "_")] = pgf / ref
        summary["matmul_gflops"] = t
    if a.json:
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
