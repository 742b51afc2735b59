#!/usr/bin/env bash
# The suites' throughput on one GPU: the offline (rules) team over the 10 KernelBench level-2 problems of
# benchmarks/problems/kb_l2, several attempts in flight, then every winner re-timed. Two device calls, chained on one
# warm machine (the second finds the first's compile seeds in STARK_CACHE_DIR):
#   search: benchmarks/kb_rules.sh without re-times (STREAMS benches side by side, PARALLEL attempts in flight each),
#           with the device lock traced ($STARK_LOCK_TRACE), then benchmarks/kb_throughput.py over the trees:
#           judged attempts per minute per GPU, per full minute, and the lock's exclusive/shared/free shares;
#   retime: benchmarks/kb_retime.sh over the search call's trees.tar.gz (one stream: re-times alone are the true
#           ones; RETIME_STREAMS=N side by side, each round still timed alone under the device lock, what is left
#           unstable re-timed alone in the quiet pass; RETIME_PARALLEL=K re-time children at once in each stream,
#           kb_retime.sh's PARALLEL, default 1), then kb_throughput.py again (it counts the winners re-timed).
# Usage on the GPU host, from the repository root (writes to $OUT):
#   bash benchmarks/throughput.sh search [budget=8] [seconds-per-problem=430] [parallel=2] [streams=10] [deadline=540]
#   bash benchmarks/throughput.sh retime TREES.tar.gz [deadline=560]
# One call for both halves: RETIME_S=S PARALLEL=K with `search` stops the searches S seconds before the deadline and
# re-times every tree inside the same call, K re-time children at once (kb_rules.sh, kb_retime.sh).
# SELECT replaces the problems (default kb_l2; kb_rules.sh's selectors: DEVICE=cpu SELECT=<dir> is a CPU smoke run).
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
out=${OUT:-/tmp/throughput}
mode=${1:-search}
shift
mkdir -p "$out"
gpu=$(nvidia-smi -L 2> /dev/null | head -1 | sed 's/ (UUID.*//')
gpus=$(nvidia-smi -L 2> /dev/null | wc -l)
[ "$gpus" -gt 0 ] || gpus=1  # a CPU smoke run (DEVICE=cpu): one "device"
trees=$(mktemp -d)
if [ "$mode" = search ]; then
  export STARK_LOCK_TRACE=/tmp/lock.trace
  rm -f "$STARK_LOCK_TRACE"
  OUT="$out" BENCH_FLAGS="${BENCH_FLAGS:---max-autotune-baseline}" \
    bash benchmarks/kb_rules.sh "${1:-8}" "${2:-430}" "${3:-2}" "${4:-10}" "${5:-540}" ${SELECT:-kb_l2}
  tar -xzf "$out/trees.tar.gz" -C "$trees"
  python3 -m benchmarks kb-throughput --gpus "$gpus" --device "$gpu" --lock-trace "$STARK_LOCK_TRACE" \
    --out "$out/throughput.json" "$trees"/*.json | tee -a "$out/device.txt"
  gzip -c "$STARK_LOCK_TRACE" > "$out/lock.trace.gz"
elif [ "$mode" = retime ]; then
  archive=${1:?usage: throughput.sh retime TREES.tar.gz [deadline]}
  tar -xzf "$archive" -C "$trees"
  OUT="$out" PARALLEL="${RETIME_PARALLEL:-1}" \
    bash benchmarks/kb_retime.sh "${RETIME_STREAMS:-1}" "${2:-560}" "$trees"
  python3 -m benchmarks kb-throughput --gpus "$gpus" --device "$gpu" --out "$out/throughput.json" \
    "$trees"/*.json | tee -a "$out/device.txt"
else
  echo "usage: bash benchmarks/throughput.sh search|retime ..." >&2
  exit 2
fi
