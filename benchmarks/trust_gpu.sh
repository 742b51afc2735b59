#!/usr/bin/env bash
# The trust checks on one GPU, in one device call: does the parent's clock reject forged timing (witness-check), what
# does the default fuzzing level cost an evaluation (fuzz-cost), what does it catch of the plain-torch illusion corpus
# (fuzz-cost --corpus, beside the GPU tests of tests/kernels). The timed parts run alone; the corpus and the tests
# (correctness only) share the card at the end.
# Usage on the GPU host, from the repository root (writes to $OUT):
#   bash benchmarks/trust_gpu.sh [corpus levels=standard] [fuzz-cost problems: its --problems, default its own list]
# Time limits (seconds): WITNESS_S=150, FUZZ_COST_S=200, TESTS_S=230 (the corpus and the GPU tests, side by side).
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
out=${OUT:-/tmp/trust}
mkdir -p "$out"
{ nvidia-smi -L; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; date -u +%FT%TZ; } | tee "$out/device.txt"
timeout ${WITNESS_S:-150} python3 -m benchmarks witness-check --device cuda --out "$out/witness_check.json" > "$out/witness.log" 2>&1
echo "witness-check exit $?" | tee -a "$out/witness.log"
timeout ${FUZZ_COST_S:-200} python3 -m benchmarks fuzz-cost --device cuda ${2:+--problems "$2"} --out "$out/fuzz_cost.json" \
  > "$out/fuzz_cost.log" 2>&1
echo "fuzz-cost exit $?" | tee -a "$out/fuzz_cost.log"
timeout ${TESTS_S:-230} python3 -m pytest tests/kernels -m gpu -q -p no:cacheprovider > "$out/gpu_tests.log" 2>&1 &
timeout ${TESTS_S:-230} python3 -m benchmarks fuzz-cost --device cuda --corpus tests/kernels/fixtures/fuzz_classes \
  --levels "${1:-standard}" --out "$out/fuzz_corpus.json" > "$out/fuzz_corpus.log" 2>&1
echo "fuzz corpus exit $?" | tee -a "$out/fuzz_corpus.log"
wait
date -u +%FT%TZ | tee -a "$out/device.txt"
tail -14 "$out/witness.log"; tail -12 "$out/fuzz_cost.log"; tail -8 "$out/fuzz_corpus.log"; tail -4 "$out/gpu_tests.log"
