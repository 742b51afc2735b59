#!/usr/bin/env bash
# device_busy above the harness, on the H200 (torch + CUDA only; no Django, Redis or internet), about 150 s at most.
# A separate "hog" process holds all but 1 GiB of the GPU; the problem's get_inputs() asks for 4 GiB. The harness
# reruns a busy child once after 1 s (STARK_DEVICE_BUSY_RERUNS_S=1); the search waits 5 s, doubling
# (STARK_DEVICE_BUSY_FIRST_WAIT_S=5):
# 1. the CLI's problem check (search.inline.problem_waiting) while the hog holds the GPU for 20 s: waits, then passes;
# 2. the reference's evaluation (Engine.evaluate_root, the CLI/bench path) likewise: waits, then passes;
# 3. a candidate evaluated while the hog holds the GPU for 12 s: its result has the flag device_busy;
# 4. the reference with a hog that stays (STARK_DEVICE_BUSY_WAIT_S=15): the root ends device_busy, message kept.
# Writes $OUT/busy.json (what happened, per step, with the waits printed) and $OUT/busy.log.
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/busy_out}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" STARK_DEVICE_BUSY_RERUNS_S=1 STARK_DEVICE_BUSY_FIRST_WAIT_S=5
timeout 170 python gpu_checks/busy_check.py "$OUT" > "$OUT/busy.log" 2>&1
echo "busy_check exit $?" >> "$OUT/busy.log"
tail -5 "$OUT/busy.log"
