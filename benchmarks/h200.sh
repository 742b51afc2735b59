#!/usr/bin/env bash
# One device call on the H200: the offline rules team over GPU-sized copies of every sample problem
# (benchmarks/problems_gpu.py), levels 1-3, with `python -m search bench`. The three levels run side by side
# (CPU-side work overlaps; the harness's per-device timing lock makes their timed sections take turns), each
# problem with a wall-time limit so that the whole call fits one lease. The tables are rebuilt from the tree
# files with the bench's own metrics code (benchmarks/bench_from_trees.py), so a level cut short still counts.
#
# Usage on the GPU host, from the repository root:
#   bash benchmarks/h200.sh [budget] [seconds-per-problem] [parallel-attempts]
# Writes to $OUT (or docs/benchmarks/h200): device.txt, rules_h200.json/.md, trees.tar.gz, bench-level*.log
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
budget=${1:-6}
per_problem=${2:-80}
parallel=${3:-2}
out=${OUT:-docs/benchmarks/h200}
problems=$(mktemp -d)
trees=$(mktemp -d)
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%FT%TZ; echo "budget $budget, ${per_problem} s per problem, $parallel attempts in flight"; } | tee "$out/device.txt"
python3 benchmarks/problems_gpu.py "$problems" > /dev/null || exit 1
limit=$((6 * per_problem + 60))  # a level's whole bench, so the call ends inside its lease even if a problem overruns
for level in level1 level2 level3; do
  timeout "$limit" python3 -m search bench "$problems/$level"/*.py --team rules --budget "$budget" --device cuda \
    --parallel "$parallel" --time-limit "$per_problem" --out "$trees/bench-$level.json" --trees "$trees" \
    > "$out/bench-$level.log" 2>&1 &
done
wait
python3 benchmarks/bench_from_trees.py "$out/rules_h200.json" "$trees"/level*.json
tar -czf "$out/trees.tar.gz" -C "$trees" .
