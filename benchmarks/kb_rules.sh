#!/usr/bin/env bash
# the offline rules team on the KernelBench-shaped set (benchmarks/problems/kb_l1 + kb_l2) with
# `python -m search bench --team rules --max-autotune-baseline --retime`, in one device call. Modelled on
# benchmarks/rules_gpu.sh: the selected problems are dealt round-robin into STREAMS benches that run side by side (the
# harness's per-device lock makes their timed work take turns), each problem with a wall-time limit for its search,
# each stream with DEADLINE seconds in all so the call ends inside its lease. Then, in RETIME_S seconds kept for it
# (default 0: none), the winners and both torch.compile modes are re-timed side by side with the reference
# (benchmarks/kb_retime.sh, `python -m search retime`, in RETIME_STREAMS streams, default 1: re-times side by side
# disturb each other, see kb_retime.sh): the searches stop
# RETIME_S before DEADLINE, so no stream is cut off before its re-times (runs without it re-timed 1 of 10 when
# each bench re-timed after its own search). Without RETIME_S the bench re-times after each search (--retime in the
# default bench flags). The table is rebuilt from the tree files (benchmarks/kb_table.py), so a stream cut short
# still counts what it finished.
#
# Usage on the GPU host, from the repository root:
#   [RETIME_S=240] bash benchmarks/kb_rules.sh [budget=8] [seconds-per-problem=320] [parallel=2] [streams=8] [deadline=555] [SELECTOR...]
# SELECTOR (default: kb_l1 kb_l2): kb_l1, kb_l2, kb_l2/gemm_relu_divide, a path to a problem file or directory, and/or
# shard:I/N (keep every N-th of the selected problems from the I-th on, I = 1..N: two device calls are
# `... shard:1/2` and `... shard:2/2`). DEVICE=cpu runs the same on the CPU (a smoke test of this script);
# BENCH_FLAGS replaces the bench flags "--max-autotune-baseline --retime" (e.g. lighter ones for that smoke test).
# TREES_IN=trees.tar.gz (or a directory of tree files) continues an earlier call's searches (`bench --resume`): a
# budget that one 10-minute device call cannot reach is spread over several; the references are not judged again.
# Writes to $OUT (or var/bench/kb-rules): device.txt, kb_rules.md/.json (kb_table.py), trees.tar.gz
# (the tree files: merge shards with `python -m benchmarks kb-table --out X trees/*.json`) and logs.tar.gz (the
# benches' JSON and logs, the re-times' logs, monitor.log: the device tool brings back at most 8 files).
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
budget=${1:-8}
per_problem=${2:-320}
parallel=${3:-2}
streams=${4:-8}
deadline=${5:-555}
shift $(($# < 5 ? $# : 5))
selectors=("${@:-kb_l1 kb_l2}")
device=${DEVICE:-cuda}
retime_s=${RETIME_S:-0}
if [ "$retime_s" -gt 0 ]; then default_flags="--max-autotune-baseline"; else default_flags="--max-autotune-baseline --retime"; fi
read -r -a flags <<< "${BENCH_FLAGS:-$default_flags}"
search_deadline=$((deadline - retime_s))
[ "$search_deadline" -gt 0 ] || { echo "RETIME_S ($retime_s) must be less than the deadline ($deadline)" >&2; exit 2; }
out=${OUT:-var/bench/kb-rules}
root=benchmarks/problems
trees=$(mktemp -d)
logs=$(mktemp -d)
if [ -n "${TREES_IN:-}" ]; then  # continue the searches of an earlier call (its trees.tar.gz or tree directory)
  if [ -d "$TREES_IN" ]; then cp "$TREES_IN"/*.json "$trees"/; else tar -xzf "$TREES_IN" -C "$trees"; fi || exit 2
  flags+=(--resume)
fi
mkdir -p "$out"
{ command -v nvidia-smi > /dev/null && nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__)"
  python3 -c "import triton; print('triton', triton.__version__)" 2> /dev/null
  date -u +%FT%TZ
  echo "budget $budget, ${per_problem} s per problem, $parallel attempts in flight, $streams streams, ${deadline} s each" \
       "(${retime_s} s of it kept for the re-times), device $device"
  echo "selected: ${selectors[*]}; bench flags: ${flags[*]}"
  echo "compiles aside from the device lock: STARK_COMPILE_ASIDE=${STARK_COMPILE_ASIDE:-auto}"
  echo "children on the shared side at once: STARK_DEVICE_SLOTS=${STARK_DEVICE_SLOTS:-auto}"; } | tee "$out/device.txt"
files=()
shard=""
for sel in ${selectors[*]}; do
  case "$sel" in
    shard:*) shard=${sel#shard:} ;;
    *) if [ -d "$root/$sel" ]; then files+=("$root/$sel"/*.py)
       elif [ -f "$root/$sel.py" ]; then files+=("$root/$sel.py")
       elif [ -d "$sel" ]; then files+=("$sel"/*.py)
       elif [ -f "$sel" ]; then files+=("$sel")
       else echo "unknown selector $sel: use kb_l1, kb_l2, kb_l2/<name>, a path, or shard:I/N" >&2; exit 2; fi ;;
  esac
done
if [ -n "$shard" ]; then
  i=${shard%/*}; n=${shard#*/}
  kept=()
  for ((k = i - 1; k < ${#files[@]}; k += n)); do kept+=("${files[k]}"); done
  files=("${kept[@]}")
fi
echo "problems (${#files[@]}): ${files[*]}" | tee -a "$out/device.txt"
# every 30 s: the GPU's memory and load, the host's memory and load, and the busiest processes (why a search made no
# progress; a machine that stopped answering with 12 slots once left no trace of why)
(while sleep 30; do date -u +%T; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader 2> /dev/null
   free -m | sed -n 2p; cut -d' ' -f1-4 /proc/loadavg
   ps -eo etimes,pcpu,rss,args --sort=-pcpu | head -14 | cut -c1-220; done) > "$logs/monitor.log" 2>&1 &
monitor=$!
pids=()
for ((s = 0; s < streams; s++)); do
  share=()
  for ((k = s; k < ${#files[@]}; k += streams)); do share+=("${files[k]}"); done
  [ ${#share[@]} -eq 0 ] && continue
  timeout "$search_deadline" python3 -m search bench "${share[@]}" --team rules --budget "$budget" --device "$device" \
    --parallel "$parallel" --time-limit "$per_problem" "${flags[@]}" \
    --out "$logs/bench-stream$s.json" --trees "$trees" > "$logs/bench-stream$s.log" 2>&1 &
  pids+=($!)
done
[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}"
kill "$monitor" 2> /dev/null
date -u +%FT%TZ | tee -a "$out/device.txt"
if [ "$retime_s" -gt 0 ] && compgen -G "$trees/*.json" > /dev/null; then
  OUT="$logs/retime" DEVICE="$device" bash benchmarks/kb_retime.sh "${RETIME_STREAMS:-1}" "$retime_s" "$trees"
  grep -E "^== |re-timed side by side" "$logs/retime/device.txt" >> "$out/device.txt"
fi
if compgen -G "$trees/*.json" > /dev/null; then
  python3 -m benchmarks kb-table --out "$out/kb_rules" "$trees"/*.json
else
  echo "no problem finished inside ${deadline} s: no table" | tee -a "$out/device.txt"
fi
tar -czf "$out/trees.tar.gz" -C "$trees" .
tar -czf "$out/logs.tar.gz" -C "$logs" .
