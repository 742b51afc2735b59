#!/usr/bin/env bash
# grounding (issue 16): the rules team's new candidate layout (reference untouched, header comment, the traced
# forward always spelled out in ModelNew; torch.compile / CUDA graph / channels_last on top of it) on a real GPU.
# Runs the rules team inline (python -m search run: no Django, no Redis) on three sample problems; each tree,
# its outline and a verdict summary go to $OUT. Every attempt also passed the engine's grounding contract.
set -uo pipefail
OUT=${OUT:-/tmp/grounding-gpu}
mkdir -p "$OUT"
PY=${PYTHON:-python}
for p in examples/problems/level2/conv2d_relu_bias_add.py examples/problems/level3/attention_block.py \
         examples/problems/level1/matmul.py; do
  name=$(basename "$p" .py)
  timeout 200 "$PY" -m search run "$p" --team rules --budget 6 --device cuda --timing-runs 30 \
    --out "$OUT/$name.tree.json" --quiet > "$OUT/$name.log" 2>&1
  echo "$name exit $?" >> "$OUT/summary.txt"
  "$PY" -m search show "$OUT/$name.tree.json" >> "$OUT/summary.txt" 2>&1
done
"$PY" - "$OUT" <<'PY' >> "$OUT/summary.txt" 2>&1
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.tree.json")):
    nodes = json.loads(f.read_text())["nodes"]
    for n in nodes:
        if n["parent"] is None:
            continue
        grounding = [ln for ln in (n.get("agent_log") or "").splitlines() if ln.startswith("grounding:")]
        print(f.stem, n["id"], n["verdict"], (n.get("reasons") or [""])[0][:200], grounding[:1])
PY
cat "$OUT/summary.txt"
