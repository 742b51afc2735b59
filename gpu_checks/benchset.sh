#!/usr/bin/env bash
# benchset (issue 19) on the H200: a short run of benchmarks/kb_rules.sh — 3 problems of the KernelBench-shaped set
# (an elementwise chain, a GEMM + epilogue, a conv + epilogue) at budget 3, plus kb_scale's 6.4 GB LeakyReLU, which
# should end "at the roofline" right after the reference. Checks on a real GPU: the first attempts are
# torch.compile(default) then max-autotune, the re-time side by side (bench --retime), the table script.
# First, alone on the device: every problem of the set built at full size with eager forward() timed and the peak
# memory (benchmarks/kb_set.py --time cuda: the "eager < ~2 s, fits the H200" check), under a minute.
# From the repository root, writes to $OUT; at most about 6 minutes in all.
set -uo pipefail
: "${OUT:?set OUT to the output directory}"
mkdir -p "$OUT"
timeout 120 python3 benchmarks/kb_set.py --time cuda --json "$OUT/kb_set_h200.json" > "$OUT/kb_set_h200.md" 2>&1
echo "kb_set exit $?" >> "$OUT/kb_set_h200.md"
bash benchmarks/kb_rules.sh 3 75 2 4 300 kb_l1/new_gelu kb_l2/gemm_relu_divide kb_l2/conv2d_subtract_subtract_mish \
  benchmarks/problems/kb_scale/l1_leaky_relu_6gb.py
mkdir -p "$OUT/trees" && tar -xzf "$OUT/trees.tar.gz" -C "$OUT/trees"
for t in "$OUT"/trees/*.json; do python3 -m search show "$t" > "${t%.json}.outline.txt" 2>&1; done
