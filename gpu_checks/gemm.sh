#!/usr/bin/env bash
# gemm helper's GPU check, from the repository root: (1) the gpu-marked numerics test of the GEMM / conv-NHWC / CUDA
# graph candidates (tests/teams/test_rules_gemm.py, at most 120 s), (2) the GEMM + epilogue benchmark
# (benchmarks/gemm_epilogue.py: eager, compile default / max-autotune-no-cudagraphs, fuse-all, cuBLASLt epilogue,
# Triton template, conv channels_last, CUDA graphs), stopped after GEMM_DEADLINE seconds (default 240; later
# problems are skipped). Everything lands in $OUT: device.txt, pytest_gpu.log, gemm_epilogue.{log,json,md}.
set -uo pipefail
out=${OUT:-/tmp/gemm_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/gemm-inductor}
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  date -u +%FT%TZ; } > "$out/device.txt" 2>&1
timeout 120 python3 -m pytest tests/teams/test_rules_gemm.py -m gpu -q -p no:cacheprovider > "$out/pytest_gpu.log" 2>&1
echo "exit $?" >> "$out/pytest_gpu.log"
deadline=${GEMM_DEADLINE:-240}
timeout $((deadline + 120)) python3 benchmarks/gemm_epilogue.py --out "$out" --deadline "$deadline" \
  > "$out/gemm_epilogue.log" 2>&1
echo "exit $?" >> "$out/gemm_epilogue.log"
tail -5 "$out/pytest_gpu.log"
tail -40 "$out/gemm_epilogue.log"
