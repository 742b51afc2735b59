#!/usr/bin/env bash
# A smoke test of the harness and the one verdict on the H200. Two parts, one device call each:
#   search: a short rules search on a GPU-sized problem, re-timed with its contenders and printed by `search show`,
#           beside the harness-bound tests (parent-owned deadlines, the lock broker, caps) on a host without bwrap;
#   tests:  the GPU tests of tests/kernels.
# Usage on the GPU host, from the repository root: bash benchmarks/gpu_smoke.sh search|tests   (writes to $OUT)
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
out=${OUT:-/tmp/smoke}
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u +%FT%TZ; } | tee "$out/device.txt"
if [ "${1:-search}" = tests ]; then
  timeout 540 python3 -m pytest tests/kernels -m gpu -q -p no:cacheprovider > "$out/gpu_tests.log" 2>&1
  echo "exit $?" >> "$out/gpu_tests.log"
  tail -15 "$out/gpu_tests.log"
  exit 0
fi
problems=$(mktemp -d)
python3 -m benchmarks problems-gpu "$problems" > /dev/null || exit 1
problem="$problems/level2/linear_gelu_scale.py"
timeout 400 python3 -m pytest tests/kernels/test_bounds.py -q -p no:cacheprovider > "$out/bounds_tests.log" 2>&1 &
{ timeout 330 python3 -m search run "$problem" --team rules --budget 6 --parallel 2 --device cuda --out "$out/tree.json"
  echo "exit $?"
  timeout 180 python3 -m search retime "$out/tree.json"; echo "retime exit $?"
  python3 -m search show "$out/tree.json"; } > "$out/search.log" 2>&1
wait
date -u +%FT%TZ | tee -a "$out/device.txt"
tail -8 "$out/bounds_tests.log"; tail -40 "$out/search.log"
