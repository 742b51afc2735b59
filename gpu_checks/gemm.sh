#!/usr/bin/env bash
# gemm helper: the GEMM + epilogue benchmark (benchmarks/gemm_epilogue.py) on the GPU; writes gemm_epilogue.json/.md
# and the log to $OUT. GEMM_DEADLINE (seconds, default 300) bounds the run: later problems are skipped.
set -uo pipefail
out=${OUT:-/tmp/gemm_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-/tmp/gemm-inductor}
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } \
  > "$out/device.txt" 2>&1
timeout $(( ${GEMM_DEADLINE:-300} + 120 )) python3 benchmarks/gemm_epilogue.py --out "$out" \
  --deadline "${GEMM_DEADLINE:-300}" > "$out/gemm_epilogue.log" 2>&1
echo "exit $?" >> "$out/gemm_epilogue.log"
tail -60 "$out/gemm_epilogue.log"
