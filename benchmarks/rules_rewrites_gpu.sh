#!/usr/bin/env bash
# The rules team's exact rewrites on a GPU host (torch + CUDA; no Django, Redis or internet): render the candidate with
# every rewrite that applies for each problem of benchmarks/rules_rewrites.py (at KernelBench's current sizes), then
# time it call by call beside the eager reference, torch.compile(mode="default") of the reference and of the candidate.
# Writes $OUT/rules_rewrites_gpu.json and .txt (the table); latest results: benchmarks/results/rules-rewrites/.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/rules_rewrites_out}"
mkdir -p "$OUT"
DIR="$(mktemp -d)"
python -m benchmarks rules-rewrites render "$DIR" > "$OUT/rules_rewrites_render.txt" 2>&1
timeout 330 python -m benchmarks rules-rewrites time "$DIR" --device cuda --runs 20 --rounds 3 --budget-s 220 \
    --json "$OUT/rules_rewrites_gpu.json" > "$OUT/rules_rewrites_gpu.txt" 2>&1
echo "exit status $?" >> "$OUT/rules_rewrites_gpu.txt"
rm -rf "$DIR"
tail -15 "$OUT/rules_rewrites_gpu.txt"
