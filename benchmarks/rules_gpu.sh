#!/usr/bin/env bash
# The offline rules team on a GPU with `python -m search bench`, over GPU-sized copies of the sample problems
# (benchmarks/problems_gpu.py), in one device call. The selected problems are dealt round-robin into STREAMS
# benches that run side by side (CPU-side work overlaps; the harness's per-device lock makes their device work take
# turns, so timings are not disturbed), each problem with a wall-time limit, each stream with DEADLINE seconds in
# all so the call ends inside its lease. The tables are rebuilt from the tree files with the bench's own metrics
# code (benchmarks/bench_from_trees.py), so a stream cut short still counts the problems it finished.
#
# Usage on the GPU host, from the repository root:
#   bash benchmarks/rules_gpu.sh [budget=6] [seconds-per-problem=90] [parallel=2] [streams=6] [deadline=520] [SELECTOR...]
# SELECTOR: level1, level2, level3 or level2/linear_gelu_scale (default: every problem). With EXTRA set, that
# command runs beside the benches (e.g. EXTRA="python3 -m pytest tests/teams -m gpu -q"), its output in the logs.
# DEVICE=cpu runs the same on the CPU (a smoke test of this script).
# Writes to $OUT (or var/bench/rules-gpu): device.txt, rules.json/.md, trees.tar.gz, logs.tar.gz.
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
budget=${1:-6}
per_problem=${2:-90}
parallel=${3:-2}
streams=${4:-6}
deadline=${5:-520}
shift $(($# < 5 ? $# : 5))
selectors=("${@:-level1 level2 level3}")
out=${OUT:-var/bench/rules-gpu}
problems=$(mktemp -d)
trees=$(mktemp -d)
logs=$(mktemp -d)
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%FT%TZ
  echo "budget $budget, ${per_problem} s per problem, $parallel attempts in flight, $streams streams, ${deadline} s each"
  echo "selected: ${selectors[*]}"; } | tee "$out/device.txt"
python3 -m benchmarks problems-gpu "$problems" > /dev/null || exit 1
files=()
for sel in ${selectors[*]}; do
  if [ -d "$problems/$sel" ]; then files+=("$problems/$sel"/*.py); else files+=("$problems/$sel.py"); fi
done
[ -n "${EXTRA:-}" ] && { timeout "$deadline" bash -c "$EXTRA" > "$logs/extra.log" 2>&1; echo "exit $?" >> "$logs/extra.log"; } &
for ((s = 0; s < streams; s++)); do
  share=()
  for ((i = s; i < ${#files[@]}; i += streams)); do share+=("${files[i]}"); done
  [ ${#share[@]} -eq 0 ] && continue
  timeout "$deadline" python3 -m search bench "${share[@]}" --team rules --budget "$budget" --device "${DEVICE:-cuda}" \
    --parallel "$parallel" --time-limit "$per_problem" --out "$logs/bench-stream$s.json" --trees "$trees" \
    > "$logs/bench-stream$s.log" 2>&1 &
done
wait
date -u +%FT%TZ | tee -a "$out/device.txt"
if compgen -G "$trees/level*.json" > /dev/null; then
  python3 -m benchmarks bench-from-trees --out "$out/rules.json" "$trees"/level*.json
else
  echo "no problem finished inside ${deadline} s: no table" | tee -a "$out/device.txt"
fi
tar -czf "$out/trees.tar.gz" -C "$trees" .
tar -czf "$out/logs.tar.gz" -C "$logs" .
