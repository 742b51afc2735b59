#!/usr/bin/env bash
# One device call on the H200: the offline rules team over sample problems of each level with
# `python -m search bench` (per-problem wall-time limit so the whole call fits the lease).
# Usage on the GPU host, from the repository root: bash benchmarks/h200.sh [budget] [seconds-per-problem]
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
budget=${1:-6}
per_problem=${2:-45}
out=${OUT:-docs/benchmarks/h200}
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u +%FT%TZ; } \
  | tee "$out/device.txt"
python3 -m search bench \
  examples/problems/level1/softmax.py examples/problems/level1/layernorm.py \
  examples/problems/level2/bias_mul_clamp_hardswish_tanh.py examples/problems/level2/linear_gelu_scale.py \
  examples/problems/level3/mobile_se_block.py \
  --team rules --budget "$budget" --device cuda --parallel 4 --time-limit "$per_problem" \
  --out "$out/rules_h200.json" --trees "$out/trees"
