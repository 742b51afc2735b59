#!/usr/bin/env bash
# Profiling on a CUDA host (e.g. OUT=/tmp/out benchmarks/profiling_gpu.sh): torch.profiler profiles of CUDA candidates (kernel names, shares, FLOP rates,
# cost against the evaluation), and the opt-in Nsight Compute run (metrics, or the note saying why not).
# Runs from the repo root; writes the gpu tests' output first ($OUT/pytest_gpu.txt: torch.profiler and ncu on their own),
# then $OUT/profiling.json and $OUT/profiling.txt (case by case, as far as the time allows).
set -uo pipefail
OUT=${OUT:-/tmp/profiling-out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD
export STARK_CACHE_DIR=$(mktemp -d)
PY=${PYTHON:-python3}
(command -v ncu && ncu --version) > "$OUT/ncu_version.txt" 2>&1
if "$PY" -c "import pytest" 2>/dev/null; then  # first: it covers the ncu run on its own
  timeout 110 "$PY" -m pytest -m gpu tests/kernels/test_profile.py -q -s -p no:cacheprovider > "$OUT/pytest_gpu.txt" 2>&1
  echo "exit $?" >> "$OUT/pytest_gpu.txt"
fi
timeout 100 "$PY" - "$OUT" <<'PYEOF' > "$OUT/profiling.txt" 2>&1
import json, sys, time, traceback
from pathlib import Path
from kernels import EvalSettings, evaluate, reference_candidate
from kernels.parent.report import profile_lines
out = Path(sys.argv[1])
gpu = Path("tests/kernels/fixtures/gpu")
cases = [("problem_gpu_matmul", None, False), ("problem_gpu_scale_add", "triton_scale_add", False),
         ("problem_gpu_scale_add", "triton_scale_add", True), ("problem_gpu_matmul", None, True),
         ("problem_gpu_scale_add", "cuda_scale_add", False)]  # the C++ extension last: a 50 s build
report = []
for problem, candidate, use_ncu in cases:
    source = (gpu / f"{problem}.py").read_text()
    cand = (gpu / f"{candidate}.py").read_text() if candidate else reference_candidate(source)
    settings = EvalSettings(device="cuda", baselines=("eager",), build_timeout_s=600, ncu=use_ncu, reuse_results=False)
    entry = {"problem": problem, "candidate": candidate or "reference", "ncu": use_ncu}
    try:
        started = time.monotonic()
        result = evaluate(source, cand, settings)
        entry.update(verdict=result.verdict, wall_s=result.wall_s, phases=result.phases, timing=result.timing,
                     profile=result.profile, elapsed_s=round(time.monotonic() - started, 3))
        print(f"== {problem} / {entry['candidate']} ncu={use_ncu}: {result.verdict}, wall {result.wall_s} s, "
              f"phases {result.phases}")
        print("\n".join(profile_lines(result.profile)))
        print(f"   cost: profile.wall_s {result.profile['wall_s']} s, profiling phase "
              f"{sum(p['seconds'] for p in result.phases if p['phase'] == 'profiling'):.3f} s of {result.wall_s} s")
    except Exception:
        entry["error"] = traceback.format_exc()
        print(entry["error"])
    report.append(entry)
    (out / "profiling.json").write_text(json.dumps(report, indent=1, default=str))
PYEOF
echo "exit $?" >> "$OUT/profiling.txt"
rm -rf "$STARK_CACHE_DIR"
