"""gpu_checks/busy.sh's steps (see there). Usage: python gpu_checks/busy_check.py OUT_DIR"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)

def get_inputs():
    return [torch.randn(1024, 1024 * 1024)]  # 4 GiB

def get_init_inputs():
    return []
"""

HOG = """
import sys, time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - int(sys.argv[1]), dtype=torch.uint8, device="cuda")
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""


def start_hog(hold_s: float) -> subprocess.Popen[str]:
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(2**30), str(hold_s)], stdout=subprocess.PIPE, text=True)
    assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
    return hog


def stop(hog: subprocess.Popen[str]) -> None:
    hog.kill()
    hog.wait()


def engine_for(source: str, cache: str) -> Any:
    from search.engine.engine import Engine
    from search.engine.events import EventLog
    from search.engine.tree import Tree
    from search.inline import kernels_evaluate

    tree = Tree(source, {"seed": 0, "budget": 1, "device": "cuda",
                         "eval": {"device": "cuda", "cache_dir": cache, "baselines": ["eager"], "roofline": False,
                                  "timing_runs": 20, "warmup_runs": 3, "profile": False}})
    log = EventLog()

    def no_team() -> Any:
        raise RuntimeError("no team is needed to evaluate the reference")
    return Engine(tree, no_team, kernels_evaluate, log), log


def step(results: dict[str, Any], name: str, fn: Any) -> None:
    started = time.monotonic()
    try:
        results[name] = {**fn(), "wall_s": round(time.monotonic() - started, 1)}
    except Exception:  # noqa: BLE001 - one failed step must not hide the others
        results[name] = {"error": traceback.format_exc()[-3000:], "wall_s": round(time.monotonic() - started, 1)}
    print(name, json.dumps(results[name])[:3000], flush=True)


def main(out: Path) -> None:
    from search.inline import problem_waiting

    work = Path(tempfile.mkdtemp(prefix="busy-check-"))
    path = work / "sum_4gib.py"
    path.write_text(PROBLEM)
    results: dict[str, Any] = {"free_total": list(__import__("torch").cuda.mem_get_info())}

    def check() -> dict[str, Any]:
        hog, text = start_hog(20), io.StringIO()
        try:
            _, summary = problem_waiting(str(path), "cuda", text)
        finally:
            stop(hog)
        return {"printed": text.getvalue().splitlines(), "summary_keys": sorted(summary)}

    def reference(hold_s: float, wait_s: str) -> Any:
        def run() -> dict[str, Any]:
            os.environ["STARK_DEVICE_BUSY_WAIT_S"] = wait_s
            engine, log = engine_for(PROBLEM, str(work / f"cache-{hold_s:g}"))
            hog = start_hog(hold_s)
            try:
                root = engine.evaluate_root()
            finally:
                stop(hog)
            return {"verdict": root.verdict, "reasons": root.reasons, "runtime_ms": root.runtime_ms,
                    "busy": engine.tree.meta.get("device_busy"), "finish": str(engine.finish_reason()),
                    "waiting": [e.data["reason"] for e in log.of_type("run.status")]}
        return run

    def candidate() -> dict[str, Any]:
        from kernels import reference_candidate
        from search.inline import kernels_evaluate

        settings = {"device": "cuda", "cache_dir": str(work / "cache-20"), "baselines": ["eager"], "roofline": False,
                    "timing_runs": 20, "warmup_runs": 3, "profile": False}
        hog = start_hog(12)
        try:
            result = kernels_evaluate(PROBLEM, reference_candidate(PROBLEM) + "    # a candidate\n", settings)
        finally:
            stop(hog)
        return {"verdict": result["verdict"], "flags": result["flags"], "reasons": result["reasons"]}

    step(results, "1_check_waits_then_passes", check)
    step(results, "2_reference_waits_then_passes", reference(20, "120"))
    step(results, "3_candidate_flagged_busy", candidate)
    step(results, "4_reference_busy_for_ever", reference(60, "15"))
    (out / "busy.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
