"""The engine's seam the CLI loop and the service steps share: schedule (limits -> select -> start a child),
finish_reason, retry; bookkeeping never builds the team, selection reads the tree's record of it."""

from __future__ import annotations

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.engine import NOTHING_SELECTABLE, Engine, Finish, selection_settings
from search.engine.events import EventLog
from search.engine.tree import Tree
from search.teams import get_team
from tests.engine.helpers import PROBLEM

PASS = {"verdict": "pass", "reasons": [], "timing": {"median_ms": 10.0}}


def no_team():  # noqa: ANN201
    raise AssertionError("the team was built")


def evaluated(settings: dict, result: dict | None = None) -> tuple[Engine, EventLog]:
    log = EventLog()
    tree = Tree(PROBLEM, {"seed": 0, **settings}, root_source=reference_candidate(PROBLEM))
    engine = Engine(tree, no_team, emit=log)
    engine.record(0, result or PASS)
    return engine, log


def recorded_selection(**options) -> dict:
    return selection_settings(get_team("scripted", {"script": "ok", **options}))


def test_bookkeeping_and_scheduling_build_no_team() -> None:
    engine, log = evaluated({"budget": 5, **recorded_selection()})
    children, stop = engine.schedule(2, elapsed_s=0.0)
    assert [c.status for c in children] == ["selected", "selected"] and stop is None
    engine.retry(children[0].id, "agents' try 1 lost: worker killed")
    engine.fail(children[0].id, "interrupted", "lost twice")
    engine.record(children[1].id, PASS)
    engine.progress()
    assert not engine.team_built
    assert "node.created" in {e.type for e in log.events}


def test_without_a_recorded_selection_the_team_is_built_to_select() -> None:
    tree = Tree(PROBLEM, {"seed": 0, "budget": 3}, root_source=reference_candidate(PROBLEM))
    built: list[str] = []

    def factory():  # noqa: ANN202
        built.append("team")
        return get_team("scripted", {"script": "ok"})

    engine = Engine(tree, factory)
    engine.record(0, PASS)
    assert not built
    engine.schedule(1, 0.0)
    engine.schedule(1, 0.0)
    assert built == ["team"]  # once, on first use


def test_schedule_stops_at_the_budget_and_says_why() -> None:
    engine, _ = evaluated({"budget": 2, **recorded_selection()})
    children, stop = engine.schedule(5, 0.0)
    assert len(children) == 2 and stop == "budget of 2 attempts spent"
    assert engine.finish_reason(stop) is None  # two attempts still in flight
    for child in children:
        engine.record(child.id, PASS)
    assert engine.finish_reason(stop) == Finish("finished", "budget of 2 attempts spent")


def test_a_time_limit_stops_and_nothing_selectable_finishes() -> None:
    engine, _ = evaluated({"budget": 9, "time_limit_s": 5, **recorded_selection()})
    children, stop = engine.schedule(1, elapsed_s=6.0)
    assert children == [] and stop == "time limit of 5 s reached"
    assert engine.finish_reason(stop) == Finish("stopped", "time limit of 5 s reached")
    assert engine.finish_reason(None) == Finish("finished", NOTHING_SELECTABLE)


def test_a_failed_reference_fails_the_run() -> None:
    engine, _ = evaluated({"budget": 3, **recorded_selection()},
                          {"verdict": "runtime_error", "reasons": ["boom"], "timing": None})
    assert engine.schedule(1, 0.0) == ([], None)  # nothing to start from
    assert engine.finish_reason() == Finish("failed", "the reference itself did not pass (runtime_error): boom")


def test_best_of_k_without_a_debugger_never_selects_a_failed_node() -> None:
    engine, _ = evaluated({"budget": 3, **recorded_selection(policy="best-of-k", no_debug=True)})
    assert engine.tree.settings["can_debug"] is False
    assert [c.parent for c in engine.schedule(3, 0.0)[0]] == [0, 0, 0]


def test_retry_puts_a_lost_phase_back_and_logs_why() -> None:
    engine, log = evaluated({"budget": 3, **recorded_selection()})
    (child,), _ = engine.schedule(1, 0.0)
    engine.set_status(child, "coding")
    engine.retry(child.id, "agents' try 1 lost: killed", "expand")
    assert child.status == "selected" and child.agent_log.endswith("agents' try 1 lost: killed; retrying once\n")
    engine.set_status(child, "building")
    engine.retry(child.id, "evaluation try 1 lost: gone", "evaluate")
    assert child.status == "building" and log.events[-1].data == {"status": "building"}
    with pytest.raises(ValueError, match="phase 'record'"):
        engine.retry(child.id, "x", "record")
    engine.record(child.id, PASS)
    with pytest.raises(ValueError, match="only an attempt in flight"):
        engine.retry(child.id, "late", "evaluate")
