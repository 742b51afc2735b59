#!/usr/bin/env bash
# re-time finished searches side by side (`python -m search retime`: each winner and both torch.compile
# modes against the reference, alternating in one harness child each), then rebuild the table
# (benchmarks/kb_table.py). The second phase of benchmarks/kb_rules.sh, and on its own for trees a search wrote
# earlier (a bench cut short before its re-times, a trees.tar.gz such as benchmarks/results/kb-rules/trees.tar.gz).
# The trees are dealt round-robin into STREAMS re-time processes that run side by side (each re-time child holds the
# harness's device lock while it times, so their compiles overlap and their timings take turns); a tree already
# re-timed usably is skipped and one re-timed in part gets only its missing entries, so a second call finishes what a
# first one cut short. The last QUIET_S seconds of the deadline (default: a fifth of it) are a quiet pass: one
# process over every tree, alone on the host, that re-times only what is still unusable (an entry that failed, or
# stayed unstable beside the other streams' compiles: an H200 re-time of a 0.2 ms winner spread 45%).
#
# Streams: 1 by default. On an H200, eight streams side by side gave the same program ratios 5-14%
# apart that no instability check flagged (new_gelu's max-autotune attempt 0.86x compile(default) beside the other
# streams, 1.00x alone; avgpool3d's compile(default) attempt 0.95x its own baseline, 1.02x alone), and one re-time
# alone took 25-36 s against 37-310 s side by side: alone is both truer and, per tree, faster.
#
# Usage on the GPU host, from the repository root:
#   bash benchmarks/kb_retime.sh [streams=1] [deadline=540] TREES...
# TREES: tree JSON files, directories of them, or .tar.gz archives of them. DEVICE=cpu re-times on the CPU (a smoke
# test of this script); ROUNDS sets the alternating rounds (default 4); PARALLEL=K runs K re-time children at once in
# each stream (`search retime --parallel K`, across its trees too; default 1: one after another): their starts and
# builds overlap, each child's timed rounds still hold the device lock alone. The quiet pass stays one at a time.
# Writes to $OUT (or var/bench/kb-retime): device.txt, kb_rules.md/.json, trees.tar.gz (the re-timed
# trees), logs.tar.gz. Tree files and directories are re-timed in place (the figures go into each tree's meta).
set -uo pipefail
export PYTHONUNBUFFERED=1 STARK_CACHE_DIR=${STARK_CACHE_DIR:-/tmp/stark-cache}
streams=${1:-1}
deadline=${2:-540}
shift $(($# < 2 ? $# : 2))
[ $# -gt 0 ] || { echo "usage: bash benchmarks/kb_retime.sh [streams] [deadline] TREES..." >&2; exit 2; }
out=${OUT:-var/bench/kb-retime}
rounds=${ROUNDS:-4}
parallel=${PARALLEL:-1}
[[ "$parallel" =~ ^[1-9][0-9]*$ ]] \
  || { echo "PARALLEL must be a count of re-time children at once, 1 or more (got $parallel)" >&2; exit 2; }
quiet=${QUIET_S:-$((deadline / 5))}
streams_deadline=$((deadline - quiet))
[ "$streams_deadline" -gt 0 ] || { echo "QUIET_S ($quiet) must be less than the deadline ($deadline)" >&2; exit 2; }
started=$(date +%s)
unpacked=$(mktemp -d)
logs=$(mktemp -d)
mkdir -p "$out"
files=()
for src in "$@"; do  # files and directories are re-timed in place; archives are unpacked first
  if [ -d "$src" ]; then files+=("$src"/*.json)
  elif [[ "$src" == *.tar.gz ]]; then d=$(mktemp -d -p "$unpacked"); tar -xzf "$src" -C "$d"; files+=("$d"/*.json)
  elif [ -f "$src" ]; then files+=("$src")
  else echo "no such tree file, directory or archive: $src" >&2; exit 2; fi
done
kept=()
for f in "${files[@]}"; do [ -f "$f" ] && kept+=("$f"); done
files=("${kept[@]}")
[ ${#files[@]} -gt 0 ] || { echo "no tree files in $*" >&2; exit 2; }
device_flag=()
[ -n "${DEVICE:-}" ] && device_flag=(--device "$DEVICE")
{ command -v nvidia-smi > /dev/null && nvidia-smi -L
  python3 -c "import torch; print('torch', torch.__version__)"
  date -u +%FT%TZ
  echo "re-time: ${#files[@]} trees, $streams streams of $parallel children at once, ${deadline} s" \
       "(the last ${quiet} s a quiet pass), $rounds rounds, device ${DEVICE:-of each tree}"; } \
  | tee "$out/device.txt"
for ((s = 0; s < streams; s++)); do
  share=()
  for ((k = s; k < ${#files[@]}; k += streams)); do share+=("${files[k]}"); done
  [ ${#share[@]} -eq 0 ] && continue
  timeout "$streams_deadline" python3 -m search retime "${share[@]}" --rounds "$rounds" --parallel "$parallel" \
    "${device_flag[@]}" > "$logs/retime-stream$s.log" 2>&1 &
done
wait
left=$((deadline - ($(date +%s) - started)))
if [ "$left" -gt 10 ]; then  # alone on the host: only the entries still unusable are timed again
  echo "quiet pass: ${left} s" | tee -a "$out/device.txt"
  timeout "$left" python3 -m search retime "${files[@]}" --rounds "$rounds" "${device_flag[@]}" \
    > "$logs/retime-quiet.log" 2>&1
fi
date -u +%FT%TZ | tee -a "$out/device.txt"
cat "$logs"/retime-stream*.log "$logs"/retime-quiet.log 2> /dev/null \
  | grep -E "^(\[[^]]*\] )?== |re-timed side by side" | tee -a "$out/device.txt"  # [tree] in front: PARALLEL > 1
python3 -m benchmarks kb-table --out "$out/kb_rules" "${files[@]}"
stage=$(mktemp -d)
cp "${files[@]}" "$stage"/
tar -czf "$out/trees.tar.gz" -C "$stage" .
tar -czf "$out/logs.tar.gz" -C "$logs" .
