"""Every question of the index, run on the CPU at its smallest (benchmarks/questions.py: `smoke`), through
`python -m benchmarks QUESTION`: it exits 0 and writes its report, whose rows hold the fields the index
(benchmarks/README.md, column "Report") names. A question that needs a GPU stops at once with the "needs a GPU"
exit, and its --help shows its usage. The runs share two interpreters (benchmarks/tests/smoke_run.py: torch and the
harness imported once each), started once for every selected test."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from benchmarks.common import NEEDS_GPU_EXIT, REPORT_KEYS
from benchmarks.questions import HERE, QUESTIONS

ROOT = HERE.parent
BROWSER = {"ui-tree"}  # needs chromium: marked browser, so `-m "not browser"` leaves it out
# The longest first: the two interpreters share them out greedily (estimated seconds on a 2-core host).
COST = {"quiet-timing": 50, "rules-cpu": 35, "rules-rewrites": 25, "bench-overlap": 25, "harness-throughput": 20,
        "own-seed": 20, "compile-seed": 20, "first-hold": 20, "gemm-epilogue": 15, "api-create-latency": 15,
        "witness-check": 12, "hold-after-timing": 12, "conv-knobs": 10, "retime-self": 10, "sandbox-overhead": 10,
        "profiling-cost": 8, "fuzz-cost": 8, "ui-tree": 8, "watch-cost": 5}


def index_reports() -> dict[str, tuple[str, list[str]]]:
    """{question: (the report's key holding its rows, the fields each row holds)} from the index's Report column
    (`rows: problem, ratio`); a question whose column says none is left out."""
    found = {}
    for name, cell in re.findall(r"^\| `([a-z0-9-]+)` \|[^|]*\|[^|]*\|[^|]*\| ([^|]*) \|$",
                                 (HERE / "README.md").read_text(), flags=re.MULTILINE):
        key, sep, fields = cell.strip().strip("`").partition(": ")
        if sep:
            found[name] = (key, [f.strip() for f in fields.split(",")])
    return found


def selected(session: pytest.Session) -> list[str]:
    names = {item.callspec.params["name"] for item in session.items
             if item.originalname == "test_the_question_runs_on_a_cpu_host" and hasattr(item, "callspec")}
    return sorted(names, key=lambda n: -COST.get(n, 1))


@pytest.fixture(scope="session")
def smoke_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder of every selected question's smoke run, run once: two interpreters side by side."""
    out = tmp_path_factory.mktemp("smoke")
    names = selected(request.session)
    shares: list[list[str]] = [[], []]
    for name in names:  # greedy: the next longest to the share with less so far
        min(shares, key=lambda s: sum(COST.get(n, 1) for n in s)).append(name)
    # TRITON_INTERPRET: Triton kernels run on the CPU (gemm-epilogue); set before the shared interpreter imports triton
    env = {**os.environ, "STARK_CACHE_DIR": str(out / "cache"), "PYTHONUNBUFFERED": "1", "TRITON_INTERPRET": "1"}
    env.pop("DEVICE", None)
    procs = [subprocess.Popen([sys.executable, "-m", "benchmarks.tests.smoke_run", str(out), *share], cwd=ROOT,
                              env=env, stdout=(out / f"runner-{i}.log").open("w"), stderr=subprocess.STDOUT)
             for i, share in enumerate(shares) if share]
    for proc in procs:
        proc.wait(timeout=900)
    return out


def quiet_timing(report: dict[str, Any]) -> None:
    """Five scenarios, each re-time figured; the busy quiet one paused the busy children, the loud ones paused
    nobody, and two quiet re-times at once paused each other."""
    rows = {row["scenario"]: row for row in report["rows"]}
    assert list(rows) == ["alone", "busy, loud", "busy, quiet", "2 at once, loud", "2 at once, quiet"]
    assert all(row["failed"] == 0 and row["re-times"] == 2 and row["speed-up"] > 0 for row in rows.values()), rows
    paused = {s["scenario"]: [r["most_paused"] for r in s["runs"]] for s in report["notes"]["scenarios"]}
    assert min(paused["busy, quiet"]) >= 1, paused
    assert max(paused["alone"] + paused["busy, loud"] + paused["2 at once, loud"]) == 0, paused
    assert max(paused["2 at once, quiet"]) >= 1, paused


def retime_self(report: dict[str, Any]) -> None:
    (row,) = report["rows"]
    assert row["problem"] == "problem_scale_add" and row["reference_ms"] > 0 and row["ratio"] > 0


def gemm_epilogue(report: dict[str, Any]) -> None:
    (row,) = report["rows"]
    variants = row["variants"]
    assert {"eager", "fuse-all (triton)", "gemm=triton"} <= set(variants)
    wrong = {name: v.get("error") for name, v in variants.items() if not v.get("correct") or not v.get("median_ms")}
    assert not wrong, wrong


def rules_rewrites(report: dict[str, Any]) -> None:
    assert report["rows"] and all(row["correct"] for row in report["rows"]), report["rows"]


# What a question's figures must say beyond their presence (the checks its own slow test made before).
CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "quiet-timing": quiet_timing, "retime-self": retime_self, "gemm-epilogue": gemm_epilogue,
    "rules-rewrites": rules_rewrites}


# Smoke runs that take minutes on a 2-core host even at their smallest (each starts many harness children or C++
# builds): marked `minutes`, which `make test` leaves out and `make bench-smoke` runs.
MINUTES = {"profiling-cost", "bench-overlap", "harness-throughput", "api-create-latency", "rules-sources",
           "rules-trace-store", "own-seed", "hold-after-timing"}


def params() -> list[Any]:
    return [pytest.param(name, marks=[pytest.mark.slow, *([pytest.mark.browser] if name in BROWSER else []),
                                      *([pytest.mark.minutes] if name in MINUTES else [])],
                         id=name) for name in QUESTIONS]


def test_every_question_runs_on_a_cpu_host_or_needs_a_gpu_and_the_index_names_its_report() -> None:
    reports = index_reports()
    for question in QUESTIONS.values():
        assert (question.smoke is None) == (question.name not in reports), (
            f"{question.name}: a question with a CPU smoke run names its report's fields in benchmarks/README.md "
            "(column Report: `rows: field, ...`); one without says — (it needs a GPU)")


@pytest.mark.parametrize("name", params())
def test_the_question_runs_on_a_cpu_host(name: str, smoke_runs: Path) -> None:
    question = QUESTIONS[name]
    result = json.loads((smoke_runs / name / "result.json").read_text())
    run = result["run"]
    if question.smoke is None:
        assert run["code"] == NEEDS_GPU_EXIT and "needs a GPU" in run["output"], run
        assert result["help"]["code"] == 0 and "usage" in result["help"]["output"].lower(), result["help"]
        return
    assert run["code"] == 0, (run["argv"], run["output"])
    report = json.loads((smoke_runs / name / question.report).read_text())
    key, fields = index_reports()[name]
    if key == "rows":
        assert set(REPORT_KEYS) <= set(report), f"{name}: write it with benchmarks.common.write_report"
    rows = report[key]
    assert rows, f"{name}: no {key} in its report"
    missing = [f for f in fields if f not in rows[0]]
    assert not missing, f"{name}: its report's {key} lack {missing} (the index names them): {sorted(rows[0])}"
    if name in CHECKS:
        CHECKS[name](report)
