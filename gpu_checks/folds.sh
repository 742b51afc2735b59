#!/usr/bin/env bash
# folds (exact graph rewrites of the rules team): time the candidates the team writes with every rewrite that applies
# (pre-rendered under gpu_checks/folds/ by `benchmarks/rules_rewrites.py render gpu_checks/folds`) against the eager
# reference, torch.compile(mode="default") of it and of the candidate (rewrite, then compile the rest), call by call
# in turn, at KernelBench's current sizes. Needs torch (+CUDA) only.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/folds_gpu_out}"
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
timeout 330 python benchmarks/rules_rewrites.py time gpu_checks/folds --device cuda --runs 20 --rounds 3 \
    --budget-s 220 --json "$OUT/folds_gpu.json" > "$OUT/folds_gpu.txt" 2>&1
echo "exit status $?" >> "$OUT/folds_gpu.txt"
tail -15 "$OUT/folds_gpu.txt"
