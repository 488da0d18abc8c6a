#!/usr/bin/env bash
# Runs every bench CLI scenario at a tiny size on every runtime, so that the CLI cannot rot.
# Seconds in all after the release build; any wrong result exits non-zero. Its sweeps draw their
# plots into a temporary directory, never into docs/benchmarks.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p threadlet-bench
plots=$(mktemp -d)
trap 'rm -rf "$plots"' EXIT
B="timeout 120 ${CARGO_TARGET_DIR:-target}/release/threadlet-bench --plot-dir $plots"
ALL=work-stealing,global-queue,gil,os-threads,tokio,sequential
TL=work-stealing,global-queue,gil
$B hackysack --players 50 --kicks 500 --runtime $ALL --workers 1,2 --repeat 1
$B hackysack --players 50 --kicks 500 --runtime $TL --workers 2 --repeat 1 --migrate
$B hackysack --players 50 --kicks 500 --runtime $TL,tokio --workers 2 --repeat 1 --warm
$B hackysack --players 50 --kicks 500 --runtime $ALL --workers 1,2 --repeat 1 --actor handler
$B count --n 200000 --runtime $ALL --workers 1,2 --repeat 1
$B count --n 200000 --ticks 100 --runtime $TL --workers 1 --repeat 1 --migrate
$B factorial --actors 20 --times 5 --runtime $ALL --workers 1,2 --repeat 1
$B pingpong --pairs 2 --round-trips 2000 --runtime $ALL --workers 1,2 --repeat 1
$B pingpong --pairs 2 --round-trips 2000 --runtime $TL --workers 2 --repeat 1 --migrate
$B pingpong --pairs 2 --round-trips 2000 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B ask --pairs 2 --round-trips 2000 --runtime $ALL --workers 1,2 --repeat 1
$B ask --pairs 2 --round-trips 2000 --runtime $TL --workers 2 --repeat 1 --migrate
$B ask --pairs 2 --round-trips 2000 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B select --messages 5000 --runtime $ALL --workers 1,2 --repeat 1
$B select --messages 5000 --runtime $TL --workers 2 --repeat 1 --migrate
$B spawn --actors 2000 --runtime $ALL --workers 1,2 --repeat 1
$B spawn --actors 2000 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B skynet --size 1000 --fanout 10 --runtime $ALL --workers 1,2 --repeat 1 --migrate
$B skynet --size 1000 --fanout 10 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B ring --actors 20 --hops 2000 --runtime $ALL --workers 1,2 --repeat 1
$B ring --actors 20 --hops 2000 --runtime $TL --workers 2 --repeat 1 --migrate --json
$B ring --actors 20 --hops 2000 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B pool --actors 3 --jobs 6 --work 100000 --runtime $ALL --workers 1,2 --repeat 1
$B pool --actors 3 --jobs 6 --work 100000 --runtime $TL --workers 1,2 --repeat 1 --actor handler
$B scaling --scenario all --workers 1,2 --runtime $TL,tokio --n 200000 --factorial-actors 20 \
    --times 5 --players 10,100 --kicks 200 --repeat 1
$B http --clients 3 --seconds 0.2 --runtime $ALL --workers 1,2 --repeat 1
$B http --clients 3 --seconds 0.2 --runtime work-stealing,os-threads --workers 1 --load multiplexed --cpus 1 --repeat 1
$B seeds --quick --repeat 1
ls "$plots"/*_workers.svg "$plots"/scaling_count.svg >/dev/null
echo "bench smoke: every scenario ran"
