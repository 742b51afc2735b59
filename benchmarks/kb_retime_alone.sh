#!/usr/bin/env bash
# re-time finished searches one at a time, alone on the host, every entry again (`python -m search retime
# --force`: the search's best, its contenders and both torch.compile modes against the reference, alternating in one
# harness child per tree). An H200 run showed why alone: eight re-time streams side by side gave program
# ratios 5-15% apart that no instability check flagged; alone, the same trees re-timed within their spreads.
# A tree is saved as soon as its re-time ends; one that would start with less than MIN_LEFT_S seconds of the
# deadline left is not started (a tree cut by the deadline keeps nothing of the call), so a later call passes the
# trees this one did not reach.
#
# Usage on the GPU host, from the repository root:
#   bash benchmarks/kb_retime_alone.sh [deadline=560] TREE.json...
# ROUNDS sets the alternating rounds (default 4). Writes to $OUT (default var/bench/kb-retime-alone):
# device.txt (GPU, torch, the trees reached and their wall times), retime.log, trees.tar.gz (the trees re-timed).
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
deadline=${1:-560}
shift $(($# < 1 ? $# : 1))
[ $# -gt 0 ] || { echo "usage: bash benchmarks/kb_retime_alone.sh [deadline] TREE.json..." >&2; exit 2; }
out=${OUT:-var/bench/kb-retime-alone}
rounds=${ROUNDS:-4}
min_left=${MIN_LEFT_S:-100}
started=$(date +%s)
mkdir -p "$out"
stage=$(mktemp -d)
{ command -v nvidia-smi > /dev/null && nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__)"
  date -u +%FT%TZ
  echo "re-time alone: $# trees, ${deadline} s, $rounds rounds, --force"; } | tee "$out/device.txt"
for f in "$@"; do
  left=$((deadline - ($(date +%s) - started)))
  if [ "$left" -lt "$min_left" ]; then
    echo "not reached (${left} s left): $f" | tee -a "$out/device.txt"
    continue
  fi
  t0=$(date +%s)
  timeout "$left" python3 -m search retime --force --rounds "$rounds" "$f" 2>&1 | tee -a "$out/retime.log"
  rc=${PIPESTATUS[0]}
  echo "$(basename "$f"): rc $rc, $(($(date +%s) - t0)) s" | tee -a "$out/device.txt"
  [ "$rc" -eq 0 ] && cp "$f" "$stage"/
done
date -u +%FT%TZ | tee -a "$out/device.txt"
tar -czf "$out/trees.tar.gz" -C "$stage" .
