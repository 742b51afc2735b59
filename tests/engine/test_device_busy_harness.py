"""The inline search (the CLI's and the bench's path: search.inline.kernels_evaluate, search.engine.loop) on a GPU
that other processes fill, with the real harness: the only fake is the GPU edge (tests/kernels/busy_gpu.py: torch says
other processes hold 79.5 GiB, forward raises CUDA's OOM while a counter file says so). The children run without
bubblewrap so that they can spend that counter."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.busy import DEVICE_BUSY, BusyPolicy
from search.engine.engine import Engine
from search.engine.events import Event, EventLog
from search.engine.loop import run as search_loop
from search.engine.tree import Tree
from search.inline import kernels_evaluate
from search.teams import get_team
from tests.engine.helpers import PROBLEM
from tests.kernels.busy_gpu import busy_problem, hog_dir, set_hog

pytestmark = pytest.mark.slow  # harness children

EVAL = {"device": "cpu", "sandbox": "none", "correctness_trials": 2, "timing_runs": 3, "warmup_runs": 1,
        "baselines": ["eager"], "roofline": False, "profile": False, "fuzz": "off"}


@pytest.fixture
def hog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """The counter file of the pretend GPU (no forward fails until a test sets it); the harness does not rerun a
    busy child itself unless the test says so."""
    monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", "")
    folder = hog_dir()
    set_hog(folder / "hog", 0)
    yield folder / "hog"
    shutil.rmtree(folder, ignore_errors=True)


def search(hog: Path, tmp_path: Path, busy: BusyPolicy, budget: int = 1, on_event=None) -> tuple[Engine, EventLog]:
    tree = Tree(busy_problem(PROBLEM, hog=hog), {"seed": 0, "budget": budget,
                                                  "eval": {**EVAL, "cache_dir": str(tmp_path / "cache")}}, root_source=reference_candidate(busy_problem(PROBLEM, hog=hog)))
    log = EventLog()

    def emit(event: Event) -> None:
        log(event)
        if on_event is not None:
            on_event(event)

    engine = Engine(tree, get_team("scripted", {"script": "ok", "policy": "reflexion"}), kernels_evaluate, emit,
                    busy=busy)
    search_loop(engine)
    return engine, log


def waiting(log: EventLog) -> list[str]:
    return [e.data["reason"] for e in log.of_type("run.status") if e.data["reason"].startswith("waiting")]


def test_a_reference_the_gpu_refuses_twice_is_evaluated_again_and_the_search_goes_on(hog: Path, tmp_path: Path):
    set_hog(hog, 2)
    engine, log = search(hog, tmp_path, BusyPolicy(wait_s=60, first_wait_s=0.2))
    root = engine.tree.root
    assert root.verdict == "pass", root.reasons
    assert engine.tree.meta["status"] == "finished" and engine.tree.attempts == 1
    assert engine.tree.meta["device_busy"]["0"]["evaluations"] == 2 and hog.read_text() == "0"
    lines = waiting(log)
    assert len(lines) == 2 and "other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free)" in lines[0]
    assert engine.tree.nodes[1].verdict == "pass"


def test_a_reference_the_gpu_refuses_for_ever_fails_the_run_with_the_device_busy_message(
        hog: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", "0.1")  # the harness reruns the child once itself
    set_hog(hog, "inf")
    engine, log = search(hog, tmp_path, BusyPolicy(wait_s=0.5, first_wait_s=0.2))
    root = engine.tree.root
    reason = engine.tree.meta["stop_reason"]
    assert engine.tree.meta["status"] == "failed" and root.verdict == DEVICE_BUSY and engine.tree.attempts == 0
    assert len(waiting(log)) == 2  # waits 0.2 s and the 0.3 s left, then the bound is spent
    assert reason.startswith("the GPU stayed busy with other processes through 3 evaluation(s) of the reference")
    assert "reference itself did not pass" not in reason and "the problem is not broken" in reason
    assert "2 tries" in reason and "run fewer evaluations per GPU" in reason


def test_an_attempt_the_gpu_refuses_once_is_evaluated_again_and_not_debugged(hog: Path, tmp_path: Path):
    def busy_after_the_reference(event: Event) -> None:
        if event.type == "node.result" and event.node == 0:
            set_hog(hog, 1)  # the next forward, the first attempt's, finds the GPU full

    engine, log = search(hog, tmp_path, BusyPolicy(wait_s=60, first_wait_s=0.2), budget=2,
                         on_event=busy_after_the_reference)
    first, second = engine.tree.nodes[1], engine.tree.nodes[2]
    assert hog.read_text() == "0" and engine.tree.meta["device_busy"] == {"1": {"evaluations": 1, "waited_s": 0.2}}
    assert first.verdict == "pass", first.reasons
    assert [e.data["verdict"] for e in log.of_type("node.result") if e.node == 1] == ["pass"]
    assert "waiting for the GPU" in first.agent_log
    assert second.role == "plan+code" and all(n.role != "debug" for n in engine.tree)


def test_the_cli_checks_a_problem_again_while_the_gpu_is_busy_then_gives_up_with_the_device_busy_message(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """search.inline.problem_waiting (`python -m search run|bench`): the problem's check (its own child, under
    bubblewrap: the GPU is busy until an instant) waits like the reference's evaluation."""
    import io
    import time

    from search.inline import UsageError, problem_waiting

    monkeypatch.setenv("STARK_DEVICE_BUSY_RERUNS_S", "")
    monkeypatch.setenv("STARK_DEVICE_BUSY_FIRST_WAIT_S", "0.2")
    monkeypatch.setenv("STARK_DEVICE_BUSY_WAIT_S", "0.5")
    path = tmp_path / "busy_for_ever.py"
    path.write_text(busy_problem(PROBLEM, busy_until=time.time() + 10**6))
    out = io.StringIO()
    with pytest.raises(UsageError) as caught:
        problem_waiting(str(path), "cpu", out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0].startswith("waiting for the GPU: other processes hold 79.5 GiB of its 80.0 GiB")
    assert "the problem is checked again in 0 s" in lines[0]
    message = str(caught.value)
    assert message.startswith(f"{path}: the GPU stayed busy with other processes through 3 evaluation(s)")
    assert "the problem is not broken" in message and "run fewer evaluations per GPU" in message

    monkeypatch.setenv("STARK_DEVICE_BUSY_FIRST_WAIT_S", "8")
    monkeypatch.setenv("STARK_DEVICE_BUSY_WAIT_S", "60")
    path = tmp_path / "busy_for_a_while.py"
    path.write_text(busy_problem(PROBLEM, busy_until=time.time() + 6))  # the first check starts well within 6 s
    out = io.StringIO()
    source, summary = problem_waiting(str(path), "cpu", out)
    assert source == path.read_text() and summary["name"] == "busy_for_a_while"
    assert out.getvalue().startswith("waiting for the GPU: other processes hold 79.5 GiB")
    assert out.getvalue().count("\n") == 1  # one wait of 8 s takes it past the busy 6 s
