"""search.engine.busy: an evaluation the GPU's other processes spoilt (the harness's device_busy flag) is evaluated
again after a wait, never recorded as the node's verdict; the reference waits (bounded) and then fails the run with
the device-busy message, an attempt is re-evaluated (bounded), never debugged. The busy results are the ones the
harness builds (kernels.parent.judge.process_failure, kernels.parent.jobs.problem_result); the harness itself on a pretend busy
GPU is tests/engine/test_device_busy_harness.py."""

from __future__ import annotations

from typing import Any

import pytest

from kernels import EvalSettings
from kernels.parent import judge
from kernels.parent.isolation.worker_run import WorkerRun
from kernels.parent.jobs import problem_result
from kernels.parent.problem import reference_candidate
from kernels.parent.result import EvalResult
from kernels.shared.device_busy import BUSY_KIND, GIB, busy_message
from kernels.shared.errors import DeviceBusyError
from search.engine.busy import DEVICE_BUSY, BusyPolicy, busy_reason, held_words, is_busy
from search.engine.engine import Engine
from search.engine.events import EventLog
from search.engine.loop import run as search_loop
from search.engine.tree import Tree
from search.teams import get_team
from tests.engine.helpers import PROBLEM, script_evaluate

TOTAL = 80 * GIB
BUSY = {"total": TOTAL, "free": GIB // 2, "own_reserved": 0, "others": TOTAL - GIB // 2, "requested": 2 * GIB}
FAST = BusyPolicy(wait_s=0.05, first_wait_s=0.01, evaluations=3)


def busy_error() -> dict[str, Any]:
    return {"type": "error", "kind": BUSY_KIND, "own_kind": "runtime_error", "tries": 4, "traceback": "tb",
            "message": "HarnessFailure: ModelNew.forward raised OutOfMemoryError in trial 0", "busy": BUSY}


def busy_candidate_result() -> dict[str, Any]:
    """What kernels.parent.judge.judge gives a candidate whose child stayed device_busy through the harness's reruns."""
    run = WorkerRun(messages=[busy_error(), {"type": "done"}], returncode=0)
    settings = EvalSettings()
    result = judge.judge(settings, run, None, None)  # type: ignore[arg-type]  # a failure never reads them
    return result.to_dict()


def busy_reference_result() -> dict[str, Any]:
    """What the gpu queue's job gives when the reference's own child stayed device_busy (kernels.parent.jobs)."""
    return problem_result(DeviceBusyError(busy_message(busy_error())), EvalSettings())


def engine(evaluate, busy: BusyPolicy = FAST, budget: int = 2, policy: str = "best-of-k") -> tuple[Engine, EventLog]:
    tree = Tree(PROBLEM, {"seed": 0, "budget": budget}, root_source=reference_candidate(PROBLEM))
    log = EventLog()
    return Engine(tree, get_team("scripted", {"script": "ok", "policy": policy}), evaluate, log, busy=busy), log


def busy_reference(times: int):
    """An evaluator whose first `times` evaluations (the reference's) end device_busy, and the sources it was
    given."""
    seen: list[str] = []

    def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        seen.append(candidate)
        if len(seen) <= times:
            return busy_reference_result()
        return script_evaluate(problem, candidate, settings)
    return evaluate, seen


def test_the_harness_flags_busy_results_and_the_engine_reads_them() -> None:
    candidate, reference = busy_candidate_result(), busy_reference_result()
    assert candidate["verdict"] == reference["verdict"] == "runtime_error"
    assert is_busy(candidate) and is_busy(reference)
    assert not is_busy(EvalResult(verdict="runtime_error", reasons=["CUDA out of memory"]).to_dict())
    assert busy_reason(reference).startswith("CUDA out of memory because the GPU was busy")  # "problem: " dropped
    assert held_words(busy_reason(candidate)) == "other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free)"
    assert held_words("no numbers") == "other processes hold its memory"


def test_a_reference_busy_twice_is_evaluated_again_and_the_run_goes_on() -> None:
    evaluate, seen = busy_reference(2)
    eng, log = engine(evaluate, busy=BusyPolicy(wait_s=10, first_wait_s=0.01))
    summary = search_loop(eng)
    assert summary.status == "finished" and eng.tree.root.verdict == "pass" and summary.attempts == 2
    assert len(seen) == 5  # the reference three times, then the two attempts
    waiting = [e.data["reason"] for e in log.of_type("run.status") if e.data["reason"].startswith("waiting")]
    assert len(waiting) == 2
    assert waiting[0].startswith("waiting for the GPU: other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free); "
                                 "the reference is evaluated again in 0 s (waited 0 s of at most 10 s")
    assert eng.tree.meta["device_busy"]["0"] == {"evaluations": 2, "waited_s": 0.03}  # waits 0.01 then 0.02
    assert eng.tree.root.agent_log.count("waiting for the GPU") == 2
    assert "status_line" not in eng.tree.meta  # the wait is over


def test_a_reference_busy_beyond_the_bound_fails_the_run_with_the_device_busy_message() -> None:
    evaluate, seen = busy_reference(100)
    eng, _ = engine(evaluate, busy=BusyPolicy(wait_s=0.05, first_wait_s=0.01))
    summary = search_loop(eng)
    # waits 0.01, 0.02, then the 0.02 left: four evaluations, then the bound is spent
    assert len(seen) == 4 and summary.status == "failed" and summary.attempts == 0
    assert eng.tree.root.verdict == DEVICE_BUSY
    reason = summary.stop_reason
    assert "reference itself did not pass" not in reason
    assert reason.startswith("the GPU stayed busy with other processes through 4 evaluation(s) of the reference and "
                             "0 s of waiting (STARK_DEVICE_BUSY_WAIT_S=0.05); the problem is not broken.")
    assert "run fewer evaluations per GPU" in reason and "not the fault of the problem" in reason


def test_a_candidate_busy_once_is_evaluated_again_not_debugged() -> None:
    calls: list[str] = []

    def once_busy(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        calls.append(candidate)
        if len(calls) == 2:  # the first attempt's first evaluation
            return busy_candidate_result()
        return script_evaluate(problem, candidate, settings)

    eng, log = engine(once_busy, budget=1, policy="reflexion")
    summary = search_loop(eng)
    node = eng.tree.nodes[1]
    assert summary.attempts == 1 and node.verdict == "pass" and node.role == "plan+code"
    assert calls[1] == calls[2] == node.source  # the same candidate, evaluated again
    assert [e.data["verdict"] for e in log.of_type("node.result") if e.node == 1] == ["pass"]  # never recorded busy
    assert "waiting for the GPU" in node.agent_log and "attempt 1 is evaluated again" in node.agent_log
    assert eng.tree.meta["device_busy"]["1"]["evaluations"] == 1


def test_a_candidate_busy_at_every_evaluation_ends_device_busy_and_is_not_debugged() -> None:
    calls: list[str] = []

    def always_busy(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        calls.append(candidate)
        return script_evaluate(problem, candidate, settings) if len(calls) == 1 else busy_candidate_result()

    eng, _ = engine(always_busy, budget=2, policy="reflexion")  # reflexion debugs the latest attempt if it failed
    summary = search_loop(eng)
    first, second = eng.tree.nodes[1], eng.tree.nodes[2]
    assert first.verdict == DEVICE_BUSY and first.status == "failed" and not first.debuggable
    assert first.reasons[0].startswith("the GPU stayed busy with other processes through 3 evaluation(s) of this "
                                       "attempt (STARK_DEVICE_BUSY_EVALUATIONS=3); it was not debugged.")
    assert second.role == "plan+code" and second.parent == 0  # not a debug child of the busy attempt
    assert len(calls) == 1 + 3 + 3 and summary.attempts == 2


def test_the_policy_comes_from_the_environment_and_a_bad_value_names_its_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    assert BusyPolicy.from_env() == BusyPolicy(wait_s=600.0, first_wait_s=30.0, evaluations=3)
    monkeypatch.setenv("STARK_DEVICE_BUSY_WAIT_S", "120")
    monkeypatch.setenv("STARK_DEVICE_BUSY_FIRST_WAIT_S", "5")
    monkeypatch.setenv("STARK_DEVICE_BUSY_EVALUATIONS", "2")
    assert BusyPolicy.from_env() == BusyPolicy(wait_s=120.0, first_wait_s=5.0, evaluations=2)
    monkeypatch.setenv("STARK_DEVICE_BUSY_EVALUATIONS", "two")
    with pytest.raises(ValueError, match="STARK_DEVICE_BUSY_EVALUATIONS='two' must be a whole number"):
        BusyPolicy.from_env()


def test_the_bench_waits_the_same_way_and_names_the_problems_the_busy_gpu_spoilt(
        tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m search bench` (search.inline.search_problem): a problem whose reference stays busy ends failed
    with the device-busy message, is counted device_busy and named in the Markdown; the next problem goes on."""
    import io
    import json
    from pathlib import Path

    import search.inline as inline
    from search.cli import main

    for name in ("a_busy.py", "b_fine.py"):
        (tmp_path / name).write_text(PROBLEM + f"# {name}\n")

    def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        return busy_reference_result() if "a_busy" in problem else script_evaluate(problem, candidate, settings)

    monkeypatch.setattr(inline, "kernels_evaluate", evaluate)
    monkeypatch.setattr(inline, "read_problem", lambda path, device, sandbox="auto": (Path(path).read_text(), {}))
    monkeypatch.setenv("STARK_DEVICE_BUSY_FIRST_WAIT_S", "0.01")
    monkeypatch.setenv("STARK_DEVICE_BUSY_WAIT_S", "0.02")
    out, buf = tmp_path / "results.json", io.StringIO()
    assert main(["bench", str(tmp_path), "--team", "scripted", "--budget", "1", "--script", "ok", "--device", "cpu",
                 "--out", str(out)], out=buf) == 0
    busy, fine = json.loads(out.read_text())["problems"]
    assert busy["status"] == "failed" and busy["device_busy"] == 1 and fine["device_busy"] == 0
    assert busy["stop_reason"].startswith("the GPU stayed busy with other processes through 3 evaluation(s)")
    assert fine["success"] is True
    assert buf.getvalue().count("waiting for the GPU: other processes hold 79.5 GiB") == 2  # printed as it waits
    assert "The GPU was busy with other processes (`device_busy`" in out.with_suffix(".md").read_text()
    assert "in 1 problem(s): a_busy." in out.with_suffix(".md").read_text()
