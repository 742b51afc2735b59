#!/usr/bin/env bash
# gemm helper's second GPU check (the first, 05:02, ran out of deadline before these), from the repository root:
# (1) the gpu-marked numerics test of the GEMM / conv-NHWC / CUDA graph candidates (tests/teams/test_rules_gemm.py,
# at most 150 s; needs pytest), (2) benchmarks/gemm_epilogue.py on the problems the first run skipped: the conv ->
# epilogue in NHWC, a small-M GEMM and a GEMM whose epilogue cuBLASLt cannot take (at most GEMM_DEADLINE=200 s).
# Writes device.txt, pytest_gpu.log, gemm_epilogue.{log,json,md} to $OUT.
set -uo pipefail
out=${OUT:-/tmp/gemm_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/gemm-inductor}
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%FT%TZ; } > "$out/device.txt" 2>&1
timeout 150 python3 -m pytest tests/teams/test_rules_gemm.py -m gpu -q -p no:cacheprovider > "$out/pytest_gpu.log" 2>&1
echo "exit $?" >> "$out/pytest_gpu.log"
deadline=${GEMM_DEADLINE:-200}
timeout $((deadline + 120)) python3 benchmarks/gemm_epilogue.py --out "$out" --deadline "$deadline" \
  --only conv_bias_relu_hardswish gemm_relu_small_m gemm_scale_hardtanh_gelu > "$out/gemm_epilogue.log" 2>&1
echo "exit $?" >> "$out/gemm_epilogue.log"
tail -5 "$out/pytest_gpu.log"
tail -30 "$out/gemm_epilogue.log"
