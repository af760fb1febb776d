#!/usr/bin/env bash
# The before/after latency grid of inmotion-infer, as its users run it: every family (lejepa
# t_jepa ts_jepa cf_jepa sigreg) x precision (fp32 int8 q4) artifact under FIXTURES, timed
# with `bench --json` (one thread) by two builds: `before`, built from a chosen git revision
# in a scratch worktree outside the checkout, and `after`, the working tree as it is. Builds
# and models are interleaved (one pass over the whole grid per repeat, the two builds
# alternating first), each cell measured REPS times keeping the best (lowest) median.
#
#   host    native build, run directly
#   router  static musl build, run under `qemu-x86_64 -cpu Westmere` (no AVX/AVX2/FMA: the
#           router's CPU; installs qemu-user and musl-tools if missing)
#
# Writes results/perf/bench_MODE.csv (one row per build x model x precision) and
# results/perf/bench_MODE.md (before, after, after/before per cell), and prints the table.
#
# Usage: scripts/bench-grid.sh host|router [--before REV (default HEAD)] [--reps 3]
#            [--iterations 200] [--warmup 20] [--fixtures DIR] [--out-dir results/perf]
#            [--scratch DIR] [--allow-scratch-in-checkout]
#
# The script never writes a tracked file: `before` is checked out into a worktree under the
# scratch directory (a new temporary directory by default). A scratch directory inside the
# checkout is refused unless --allow-scratch-in-checkout is given (python/test_inmotion.py
# locks that guard).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
usage() { sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; }
MODE="${1:-}"
case "$MODE" in
    host|router) shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench-grid: the first argument must be host or router" >&2; usage >&2; exit 2 ;;
esac
BEFORE=HEAD REPS=3 ITER=200 WARMUP=20 FIX=tests/fixtures/inmotion OUT_DIR=results/perf
SCRATCH="" ALLOW_INSIDE=0
while [ $# -gt 0 ]; do
    case "$1" in
        --before) BEFORE="$2"; shift 2 ;;
        --reps|--repeats) REPS="$2"; shift 2 ;;
        --iterations) ITER="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --fixtures) FIX="$2"; shift 2 ;;
        --out-dir) OUT_DIR="$2"; shift 2 ;;
        --scratch) SCRATCH="$2"; shift 2 ;;
        --allow-scratch-in-checkout) ALLOW_INSIDE=1; shift ;;
        *) echo "bench-grid: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$REPS" =~ ^[1-9][0-9]*$ && "$ITER" =~ ^[1-9][0-9]*$ && "$WARMUP" =~ ^[0-9]+$ ]] || {
    echo "bench-grid: --reps and --iterations must be positive integers, --warmup a non-negative one" >&2; exit 2; }

# The guard: the scratch directory (where `before` is checked out and built) stays outside
# the checkout, so nothing the script does can touch a file of the checkout.
if [ -z "$SCRATCH" ]; then
    SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/bench-grid.XXXXXX")"
    trap 'git -C "$ROOT" worktree remove --force "$SCRATCH/before" 2>/dev/null || true; rm -rf "$SCRATCH"' EXIT
fi
SCRATCH="$(realpath -m "$SCRATCH")"
REAL_ROOT="$(pwd -P)"
if [[ "$SCRATCH/" == "$REAL_ROOT/"* && $ALLOW_INSIDE -eq 0 ]]; then
    echo "bench-grid: refusing to use $SCRATCH: it is inside the checkout $REAL_ROOT (pass --allow-scratch-in-checkout to insist)" >&2
    exit 2
fi
mkdir -p "$SCRATCH"
REV_BEFORE="$(git rev-parse --verify "$BEFORE^{commit}" 2>/dev/null)" || {
    echo "bench-grid: --before $BEFORE is not a revision of this repository" >&2; exit 2; }

TARGET_ARGS=() RUN=() BIN_SUB=release
if [ "$MODE" = router ]; then
    MUSL=x86_64-unknown-linux-musl
    need=()
    command -v qemu-x86_64 >/dev/null || need+=(qemu-user)
    command -v musl-gcc >/dev/null || need+=(musl-tools)
    if [ ${#need[@]} -gt 0 ]; then
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
        $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >&2
    fi
    rustup target list --installed | grep -qx $MUSL || rustup target add $MUSL >&2
    TARGET_ARGS=(--target $MUSL) BIN_SUB="$MUSL/release" RUN=(qemu-x86_64 -cpu "${QEMU_X86_CPU:-Westmere}")
fi
unset RUSTFLAGS CARGO_ENCODED_RUSTFLAGS
mkdir -p "$SCRATCH/bin"
echo "bench-grid: building after (the working tree)" >&2
cargo build --release -q -p inmotion-cli "${TARGET_ARGS[@]}" >&2
cp "${CARGO_TARGET_DIR:-target}/$BIN_SUB/inmotion-infer" "$SCRATCH/bin/after"
echo "bench-grid: building before ($BEFORE = ${REV_BEFORE:0:12}) in $SCRATCH/before" >&2
git worktree remove --force "$SCRATCH/before" 2>/dev/null || true
git worktree add -q --detach "$SCRATCH/before" "$REV_BEFORE" >&2
(cd "$SCRATCH/before" && CARGO_TARGET_DIR="$SCRATCH/target" cargo build --release -q -p inmotion-cli "${TARGET_ARGS[@]}" >&2)
cp "$SCRATCH/target/$BIN_SUB/inmotion-infer" "$SCRATCH/bin/before"
git worktree remove --force "$SCRATCH/before"
REV_AFTER="$(git rev-parse HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo '+dirty')"

FAMILIES=(lejepa t_jepa ts_jepa cf_jepa sigreg)
PRECISIONS=(fp32 int8 q4)
field() { sed -n "s/.*\"$2\":\"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1"; }
declare -A BEST MIN P95 TPUT TIER SHA
for ((r = 1; r <= REPS; r++)); do
    builds=(before after); (( r % 2 == 0 )) && builds=(after before)
    for p in "${PRECISIONS[@]}"; do
        for f in "${FAMILIES[@]}"; do
            a="$FIX/${f}_$p"
            [ -f "$a/meta.json" ] || { echo "bench-grid: skip $a (absent)" >&2; continue; }
            for b in "${builds[@]}"; do
                j="$(KIN_INFER_THREADS=1 "${RUN[@]}" "$SCRATCH/bin/$b" bench --artifact "$a" \
                     --iterations "$ITER" --warmup "$WARMUP" --json)"
                med="$(field "$j" median_ms)" key="$b,$f,$p"
                prev="${BEST[$key]:-}"
                if [ -z "$prev" ] || awk -v a="$med" -v b="$prev" 'BEGIN { exit !(a < b) }'; then
                    BEST[$key]="$med" MIN[$key]="$(field "$j" min_ms)" P95[$key]="$(field "$j" p95_ms)"
                    TPUT[$key]="$(field "$j" throughput_per_s)" TIER[$key]="$(field "$j" kernel_tier)"
                    SHA[$key]="$(field "$j" artifact_sha256)"
                fi
                echo "bench-grid: rep $r $b $f $p median $med ms" >&2
            done
        done
    done
done

mkdir -p "$OUT_DIR"
us() { awk -v x="$1" 'BEGIN { printf "%.2f", x * 1000 }'; }
{
    echo "build,model,precision,best_median_us,min_us,p95_us,throughput_per_s,kernel_tier,reps,iterations,artifact_sha256,git_revision"
    for b in before after; do
        rev=$REV_BEFORE; [ $b = after ] && rev=$REV_AFTER
        for f in "${FAMILIES[@]}"; do
            for p in "${PRECISIONS[@]}"; do
                key="$b,$f,$p"
                [ -n "${BEST[$key]:-}" ] || continue
                echo "$b,$f,$p,$(us "${BEST[$key]}"),$(us "${MIN[$key]}"),$(us "${P95[$key]}"),${TPUT[$key]},${TIER[$key]},$REPS,$ITER,${SHA[$key]},$rev"
            done
        done
    done
} > "$OUT_DIR/bench_$MODE.csv"
{
    echo "# inmotion-infer latency grid: $MODE"
    echo
    echo "\`scripts/bench-grid.sh $MODE --before $BEFORE --reps $REPS --iterations $ITER --warmup $WARMUP\`:"
    echo "before ${REV_BEFORE:0:12}, after ${REV_AFTER:0:12}$( [[ $REV_AFTER == *+dirty ]] && echo ' (uncommitted changes)'),"
    echo "$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //')$( [ "$MODE" = router ] && echo ", under qemu-x86_64 -cpu ${QEMU_X86_CPU:-Westmere}"); best median of $REPS per cell, one thread."
    echo
    echo "| model | precision | before µs | after µs | after/before | tier |"
    echo "|---|---|---|---|---|---|"
    for f in "${FAMILIES[@]}"; do
        for p in "${PRECISIONS[@]}"; do
            b="${BEST[before,$f,$p]:-}" a="${BEST[after,$f,$p]:-}"
            [ -n "$b" ] && [ -n "$a" ] || continue
            echo "| $f | $p | $(us "$b") | $(us "$a") | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", a / b }') | ${TIER[after,$f,$p]} |"
        done
    done
} > "$OUT_DIR/bench_$MODE.md"
cat "$OUT_DIR/bench_$MODE.md"
echo "bench-grid: wrote $OUT_DIR/bench_$MODE.csv and $OUT_DIR/bench_$MODE.md" >&2
