#!/usr/bin/env bash
# The 5 x 3 latency grid of inmotion-infer: every family (lejepa t_jepa ts_jepa cf_jepa sigreg)
# x precision (fp32 int8 q4) artifact under FIXTURES, `bench --json` each, models interleaved
# (one pass over the whole grid per repeat, so drift and noise hit every cell alike), each cell
# repeated REPEATS times keeping the best (lowest) median. Writes CSV to stdout or --out.
#
# Usage: scripts/bench-grid.sh [--fixtures DIR] [--repeats 3] [--iterations 200] [--warmup 20]
#                              [--bin PATH] [--out FILE]
# The binary defaults to target/release/inmotion-infer (built if missing). One thread.
set -euo pipefail
cd "$(dirname "$0")/.."
FIX=tests/fixtures/inmotion
REPEATS=3
ITER=200
WARMUP=20
BIN=""
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --fixtures) FIX="$2"; shift 2 ;;
        --repeats) REPEATS="$2"; shift 2 ;;
        --iterations) ITER="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
        *) echo "bench-grid: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [ -z "$BIN" ]; then
    BIN="${CARGO_TARGET_DIR:-target}/release/inmotion-infer"
    [ -x "$BIN" ] || cargo build --release -p inmotion-cli >&2
fi
FAMILIES=(lejepa t_jepa ts_jepa cf_jepa sigreg)
PRECISIONS=(fp32 int8 q4)

field() {  # json key → value (numbers or strings without quotes)
    sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1"
}

declare -A BEST MIN P95 TPUT TIER SHA
for ((r = 1; r <= REPEATS; r++)); do
    for p in "${PRECISIONS[@]}"; do
        for f in "${FAMILIES[@]}"; do
            a="$FIX/${f}_$p"
            [ -f "$a/meta.json" ] || { echo "bench-grid: skip $a (absent)" >&2; continue; }
            j="$(KIN_INFER_THREADS=1 "$BIN" bench --artifact "$a" --iterations "$ITER" --warmup "$WARMUP" --json)"
            med="$(field "$j" median_ms)"
            key="$f,$p"
            prev="${BEST[$key]:-}"
            if [ -z "$prev" ] || awk -v a="$med" -v b="$prev" 'BEGIN { exit !(a < b) }'; then
                BEST[$key]="$med"
                MIN[$key]="$(field "$j" min_ms)"
                P95[$key]="$(field "$j" p95_ms)"
                TPUT[$key]="$(field "$j" throughput_per_s)"
                TIER[$key]="$(field "$j" kernel_tier)"
                SHA[$key]="$(field "$j" artifact_sha256)"
            fi
            echo "bench-grid: repeat $r $f $p median ${med} ms" >&2
        done
    done
done
REV="$(field "$("$BIN" bench --artifact "$FIX/${FAMILIES[0]}_fp32" --iterations 1 --warmup 0 --json 2>/dev/null || true)" git_revision)"
{
    echo "model,precision,best_median_us,min_us,p95_us,throughput_per_s,kernel_tier,repeats,iterations,artifact_sha256,git_revision"
    for f in "${FAMILIES[@]}"; do
        for p in "${PRECISIONS[@]}"; do
            key="$f,$p"
            [ -n "${BEST[$key]:-}" ] || continue
            us() { awk -v x="$1" 'BEGIN { printf "%.1f", x * 1000 }'; }
            echo "$f,$p,$(us "${BEST[$key]}"),$(us "${MIN[$key]}"),$(us "${P95[$key]}"),${TPUT[$key]},${TIER[$key]},$REPEATS,$ITER,${SHA[$key]},${REV:-unknown}"
        done
    done
} > "${OUT:-/dev/stdout}"
