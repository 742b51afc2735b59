"""What the isolation layers cost: the one-time trial runs that choose them, and one evaluation's wall time per mode.

    .venv/bin/python -m benchmarks sandbox-overhead [--repeats 3] [--out var/bench/sandbox.json]

Prints a table and writes JSON. Each evaluation uses a fresh cache (so a reference worker runs too) and the small
scale-add problem on CPU, so the figures are mostly process start-up, imports and the layers themselves.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks import common
from kernels import EvalSettings, evaluate
from kernels.parent.isolation import layers

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "kernels" / "fixtures"


def main() -> None:
    parser = common.parser(__doc__, device=None, out="var/bench/sandbox.json")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--modes", default="auto,none", help="the isolation modes, comma-separated (default auto,none)")
    args = parser.parse_args()
    problem = (FIXTURES / "problem_scale_add.py").read_text()
    candidate = (FIXTURES / "candidates" / "honest_torch.py").read_text()
    rows = []
    for mode in [m for m in args.modes.split(",") if m]:
        start = time.monotonic()
        chosen = layers.plan(mode, cuda=False)
        decide_s = time.monotonic() - start
        walls = []
        for _ in range(args.repeats):
            cache = tempfile.mkdtemp(prefix="stark-bench-")
            settings = EvalSettings(cache_dir=cache, sandbox=mode, baselines=(), roofline=False,
                                    correctness_trials=3, timing_runs=10, warmup_runs=1)
            start = time.monotonic()
            result = evaluate(problem, candidate, settings)
            walls.append(time.monotonic() - start)
            shutil.rmtree(cache, ignore_errors=True)
            assert result.verdict == "pass", result.reasons
        rows.append({"mode": mode, "layers": list(chosen.layers), "decide_s": round(decide_s, 3),
                     "eval_median_s": round(statistics.median(walls), 3), "eval_s": [round(w, 3) for w in walls]})
    common.report("sandbox_overhead", rows, Path(args.out), device="cpu",
           columns=("mode", "layers", "decide_s", "eval_median_s"))


if __name__ == "__main__":
    main()
