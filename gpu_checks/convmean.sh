#!/usr/bin/env bash
# conv-to-window-sums on the H200 (torch + CUDA only; no Django, Redis or internet), under 120 s: renders the candidate
# with every rewrite that applies for KernelBench level2/44 (benchmarks/problems/kb_l2/convtranspose2d_multiply_
# globalavgpool_twice.py) and the level2/42-shaped benchmarks/problems/rewrites/conv_transpose_mean_bias_lse.py at
# their own sizes, then times eager, the rewritten candidate, torch.compile(default) of the reference and of the
# candidate call by call with CUDA events (benchmarks/rules_rewrites.py time), and the bandwidth of the rewritten
# forward against one read of its input. Writes $OUT/convmean.json, $OUT/convmean.txt.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/convmean_out}"
mkdir -p "$OUT"
DIR="$(mktemp -d)"
timeout 40 python - "$DIR" > "$OUT/convmean.txt" 2>&1 <<'PY'
import sys
from pathlib import Path
sys.path.insert(0, "benchmarks")
import rules_rewrites as b
b.PROBLEMS = [b.ROOT / "benchmarks/problems/kb_l2/convtranspose2d_multiply_globalavgpool_twice.py",
              b.ROOT / "benchmarks/problems/rewrites/conv_transpose_mean_bias_lse.py"]
b.render(Path(sys.argv[1]))
PY
echo "render exit status $?" >> "$OUT/convmean.txt"
timeout 75 python benchmarks/rules_rewrites.py time "$DIR" --device cuda --runs 20 --rounds 3 --budget-s 55 \
    --json "$OUT/convmean.json" >> "$OUT/convmean.txt" 2>&1
echo "time exit status $?" >> "$OUT/convmean.txt"
timeout 15 python - "$OUT/convmean.json" >> "$OUT/convmean.txt" 2>&1 <<'PY'
import json, sys
rows = json.load(open(sys.argv[1]))["rows"]
read_bytes = {"convtranspose2d_multiply_globalavgpool_twice": 16 * 64 * 128 * 128 * 4,
              "conv_transpose_mean_bias_lse": 16 * 64 * 128 * 128 * 4}
for r in rows:
    if "ms" in r:
        gbs = read_bytes[r["problem"]] / (r["ms"]["rewritten"] * 1e-3) / 1e9
        print(f"{r['problem']}: rewritten {r['ms']['rewritten']:.4f} ms = {gbs:.0f} GB/s of its input read once "
              f"({100 * gbs / 4800:.0f}% of the H200's 4.8 TB/s)")
PY
rm -rf "$DIR"
tail -12 "$OUT/convmean.txt"
