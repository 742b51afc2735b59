#!/usr/bin/env bash
# One device call on the H200: the offline rules team over sample problems of each level (python -m search bench),
# one bench per level so a level that runs out of time keeps the others' results. Results land in $OUT (or
# docs/benchmarks/h200). Usage on the GPU host, from the repository root: bash benchmarks/h200.sh [budget] [seconds-per-level]
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
budget=${1:-4}
per_level=${2:-100}
out=${OUT:-docs/benchmarks/h200}
mkdir -p "$out"
nvidia-smi -L | tee "$out/device.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$out/device.txt"
date -u +%FT%TZ | tee -a "$out/device.txt"
bench() {  # level, problem files...
  local level=$1; shift
  timeout "$per_level" python3 -m search bench "$@" --team rules --budget "$budget" --device cuda --parallel 4 \
    --timing-runs 100 --out "$out/rules_$level.json" --quiet 2>&1 | tail -25
}
bench level1 examples/problems/level1/relu.py examples/problems/level1/softmax.py
bench level2 examples/problems/level2/bias_mul_clamp_hardswish_tanh.py examples/problems/level2/linear_gelu_scale.py
bench level3 examples/problems/level3/mlp.py examples/problems/level3/mobile_se_block.py
