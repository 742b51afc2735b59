"""Stored runs for the browser tests of the run page: real rows in the test database, shaped like what the
service records (figures that would mislead if shown carelessly: 24.38x vs a separately timed eager,
a reference reading "1.29x vs eager", roofline 171%, timing_unstable everywhere), each node's figure and the run's
verdict computed by search.engine.verdict on the run's tree and stored the way the service stores them."""

from __future__ import annotations

import time
from typing import Any

from kernels.parent.problem import reference_candidate
from search.engine.verdict import refresh
from stark_web.studio.events import sync_run_totals
from stark_web.studio.models import Node, Problem, Run, source_hash
from stark_web.studio.service.runs import load_tree
from tests.kernels.conftest import CLAMP, RELU

EVAL = {"timing_runs": 12, "warmup_runs": 2, "correctness_trials": 1, "baselines": ["eager", "compile"]}


def result(median: float, flags: list[str], roofline_pct: float | None = None) -> dict[str, Any]:
    return {"verdict": "pass", "reasons": [], "flags": flags, "integrity": [],
            "correctness": {"trials": 1, "passed": 1, "atol": 0.01, "rtol": 0.01, "max_abs_error": 0.0,
                            "max_rel_error": 0.0, "seeds": [0]},
            "timing": {"median_ms": median, "iqr_ms": median * 0.4, "min_ms": median * 0.7, "mean_ms": median,
                       "runs": 100, "warmup": 10},
            "baselines": {"eager_ms": 51.8, "compile_ms": 30.2, "compile_max_autotune_ms": None},
            "roofline": None if roofline_pct is None else {
                "flops": 0.0, "bytes": 3.3e7, "achieved_tflops": 0.0, "achieved_gbps": 41.0,
                "pct_of_peak": roofline_pct, "bound": "memory"},
            "logs": {"build": "", "run": ""}, "settings": {"device": "cpu", "baselines": ["eager", "compile"]},
            "environment": {"device_name": "cpu", "torch": "2.x", "hostname": "test"}, "phases": []}


def store_verdict(run: Run) -> Run:
    """What the service stores once a result or a re-time lands (stark_web.studio.service.retime.apply_verdict, without
    its events): every node's figure (search.engine.verdict.refresh on the run's tree) and the run's verdict."""
    tree = load_tree(run)
    refresh(tree)
    for node in tree:
        Node.objects.filter(run=run, node_id=node.id).update(speed=node.speed)
    sync_run_totals(run, tree)
    run.refresh_from_db()
    return run


def seeded_run(owner, best_ms: float = 20.05, name: str = "honest numbers", roofline_pct: float | None = 171.0) -> Run:
    """A finished run: the reference (40.1 ms, unstable), its best attempt at `best_ms` (unstable, at `roofline_pct`
    of its roofline: beyond 100% and not re-timed, the run has no trustworthy winner) and a failed attempt with no
    source."""
    problem, _ = Problem.objects.get_or_create(owner=owner, hash=source_hash(RELU),
                                               defaults={"name": "relu", "source": RELU})
    run = Run.objects.create(owner=owner, problem=problem, name=name, team="rules", status="finished", budget=3,
                             attempts=2, best_node=1, best_runtime_ms=best_ms, reference_runtime_ms=40.1,
                             best_speedup_vs_eager=round(51.8 / best_ms, 2), settings={"eval": EVAL},
                             stop_reason="budget used")
    now = time.time()
    common = {"run": run, "created_at": now - 60, "finished_at": now - 30, "usage": {}}
    Node.objects.create(node_id=0, parent=None, attempt=0, role="root", status="done", verdict="pass",
                        source=reference_candidate(RELU), runtime_ms=40.1, speedup_vs_eager=1.29,
                        result=result(40.1, ["timing_unstable"]), **common)
    Node.objects.create(node_id=1, parent=0, attempt=1, role="plan+code", status="done", verdict="pass",
                        source=CLAMP, runtime_ms=best_ms, speedup_vs_eager=round(51.8 / best_ms, 2),
                        instructions=["Fused Triton elementwise kernel for the relu (part 1/2: write the kernels "
                                      "here) [rules: fuse]", "Same move (fuse) (part 2/2) [rules: fuse]"],
                        result=result(best_ms, ["timing_unstable", "isolation_reduced"], roofline_pct=roofline_pct),
                        **common)
    Node.objects.create(node_id=2, parent=1, attempt=2, role="debug", status="failed", verdict="build_error",
                        source="", instructions=["fix shape: the output must keep the input's shape"],
                        reasons=["the candidate failed to build"], **common)
    return store_verdict(run)
