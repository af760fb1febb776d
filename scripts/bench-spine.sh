#!/usr/bin/env bash
# The spine's two performance figures, each against a baseline measured in the same run
# (these machines are shared and noisy, so only same-run ratios mean anything):
#   1. all-MiniLM-L6-v2 on 512 generated code snippets (batch 32, file order, f32, THREADS
#      threads, deterministic mode): kin-infer vs sentence-transformers, best of 3 interleaved runs;
#   2. 1024x1024x1024 f32 matmul: kin-infer's GEMM vs numpy (OpenBLAS) and torch.
# Needs torch + sentence-transformers for the baseline (pip install -r python/requirements.txt).
#   scripts/bench-spine.sh            THREADS=2 by default
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
threads=${THREADS:-2}
M=$(bash scripts/fetch-minilm.sh)
cargo build --release -q -p kin-infer-cli
BIN=target/release/kin-infer
mkdir -p target/bench
corpus=target/bench/corpus.txt
python3 python/gen_bench_corpus.py --model "$M" "$corpus" >&2

kin=() torch=()
for r in 1 2 3; do
    kin+=("$($BIN bench --model "$M" --input "$corpus" --batch-size 32 --repeat 1 --threads "$threads" --json 2>/dev/null)")
    torch+=("$(python3 python/bench_torch.py --model "$M" --input "$corpus" --batch-size 32 --repeat 1 --threads "$threads" 2>/dev/null | tail -n 1)")
done
python3 - "$threads" "${kin[@]}" "${torch[@]}" <<'PY'
import json, sys
threads = sys.argv[1]
runs = sys.argv[2:]
kin = [json.loads(x) for x in runs[:3]]
torch = [json.loads(x) for x in runs[3:]]
k = max(r["texts_per_s_max"] for r in kin)
t = max(r["texts_per_s_best"] for r in torch)
print(f"corpus        : {kin[0]['texts']} texts, {kin[0]['tokens']} tokens, batch 32, {threads} threads")
print(f"kin-infer     : {k:.1f} texts/s (best of 3; tier {kin[0]['simd_tier']}, load {min(r['load_ms'] for r in kin):.1f} ms)")
print(f"PyTorch (ST)  : {t:.1f} texts/s (best of 3)")
print(f"ratio         : {k / t:.2f}x  (target >= 1.5x)")
PY
python3 scripts/bench_matmul.py --threads "$threads"
