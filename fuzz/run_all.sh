#!/usr/bin/env bash
# Runs each fuzz target in turn, single job, logging to fuzz/logs/<target>.log.
#   fuzz/run_all.sh [SECONDS] [TARGET...]     (default 300 s, every target)
set -u
cd "$(dirname "$0")"
secs=${1:-300}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=($(cargo +nightly fuzz list))
mkdir -p logs
# The targets that write files do so under $TMPDIR; tmpfs keeps the disk out of the loop.
export TMPDIR=${FUZZ_TMPDIR:-/dev/shm}
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t"
    cargo +nightly fuzz run -O -a "$t" "corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=4096 -max_len=65536 -timeout=10 \
        -print_final_stats=1 >"logs/$t.log" 2>&1
    echo "$t: exit $? $(grep -E 'stat::number_of_executed_units' "logs/$t.log")"
done
