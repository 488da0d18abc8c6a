#!/usr/bin/env bash
# The many-core sweep of docs/benchmarks.md ("On 16 cores"): CPU-bound scaling, the pool of
# actors that wait and compute, message chains, and spawning, each step under a time limit so
# that one call fits a borrowed machine's lease. A few minutes on 16 cores.
#
#   bash bench/sweep.sh                      # builds, then sweeps 1,2,4,8,16 workers
#   B=path/to/threadlet-bench W=1,2 WMAX=2 OUT=/tmp/sweep bash bench/sweep.sh
#
# B: a prebuilt binary (skips the build); W: the worker counts of the sweeps; WMAX: the one
# many-worker count of the pairwise runs; OUT: where the log and the plots go.
set -u
# Paths given relative to the caller's directory, resolved before the cd below.
[ -n "${B:-}" ] && B=$(realpath "$B")
[ -n "${OUT:-}" ] && OUT=$(realpath -m "$OUT")
cd "$(dirname "$0")/.."
if [ -z "${B:-}" ]; then
    cargo build --release -p threadlet-bench || exit 1
    B=${CARGO_TARGET_DIR:-target}/release/threadlet-bench
fi
W=${W:-1,2,4,8,16}
WMAX=${WMAX:-16}
OUT=${OUT:-target/sweep}
mkdir -p "$OUT"
L=$OUT/log.txt
P=$(mktemp -d)
trap 'rm -rf "$P"' EXIT
mkdir -p "$P"/count "$P"/fact "$P"/poolh "$P"/poolp "$P"/kick "$P"/misc
START=$SECONDS
# One step: its command line with the time since the start, its output (progress lines left
# out), and its exit status (124: it ran out of its limit).
run() {
    local limit=$1
    shift
    echo "== [$((SECONDS - START))s] $*" | tee -a "$L"
    timeout "$limit" "$@" 2>&1 | grep -v '^progress' | tee -a "$L"
    echo "rc=${PIPESTATUS[0]}" | tee -a "$L"
}
# A scenario with handler actors on work stealing, then with tokio's tasks (tokio runs the
# process-actor version of each scenario: it has no handler kind).
both() {
    local limit=$1
    shift
    run "$limit" "$B" "$@" --actor handler --runtime work-stealing --repeat 3 --plot-dir "$P"/misc
    run "$limit" "$B" "$@" --runtime tokio --repeat 3 --plot-dir "$P"/misc
}
{
    nproc
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|Core|Socket|NUMA node\(s\)"
    uname -a
    free -g | head -2
} 2>&1 | tee -a "$L"
run 60 "$B" scaling --scenario count --n 50000000 --actors 16 --workers "$W" --repeat 3 --plot-dir "$P"/count
run 60 "$B" scaling --scenario factorial --times 250 --workers "$W" --repeat 3 --plot-dir "$P"/fact
for kind in handler process; do
    dir=$P/poolh
    [ $kind = process ] && dir=$P/poolp
    run 45 "$B" pool --actor $kind --actors 16 --jobs 64 --work 10000000 --workers "$W" \
        --runtime work-stealing,global-queue --repeat 3 --plot-dir "$dir"
done
run 30 "$B" hackysack --players 1000 --kicks 1000000 --actor handler --workers "$W" \
    --runtime work-stealing --repeat 3 --plot-dir "$P"/kick
run 30 "$B" hackysack --players 1000 --kicks 1000000 --workers "1,2,$WMAX" --runtime tokio \
    --repeat 3 --plot-dir "$P"/misc
both 30 ring --workers "1,$WMAX"
both 30 pingpong --pairs "$WMAX" --round-trips 200000 --workers "1,$WMAX"
both 40 hackysack --players 100000 --kicks 1000 --workers "2,$WMAX"
both 60 hackysack --players 1000000 --kicks 1000 --workers "$WMAX"
both 30 skynet --workers "1,$WMAX"
both 30 spawn --workers "1,$WMAX"
# The plots that the sweeps drew (a step that ran out of time, or a sweep of one worker
# count, draws none).
for plot in count/scaling_count.svg:scaling_count.svg fact/scaling_factorial.svg:scaling_factorial.svg \
    poolh/pool_workers.svg:pool_handler_workers.svg poolp/pool_workers.svg:pool_process_workers.svg \
    kick/hackysack_workers.svg:hackysack_handler_workers.svg; do
    if [ -f "$P/${plot%%:*}" ]; then
        cp "$P/${plot%%:*}" "$OUT/${plot##*:}"
    fi
done
echo "total ${SECONDS}s; log and plots in $OUT"
