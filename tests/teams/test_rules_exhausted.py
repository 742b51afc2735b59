"""An offline team with nothing left to try ends the run with "search space exhausted" instead of
spending the budget on attempts that say "nothing left to try from node N". Through the engine loop, the rules
team (tracing in a harness child) and the real evaluator on a small CPU problem whose space is two moves."""

from __future__ import annotations

from typing import Any

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.engine import SEARCH_EXHAUSTED, Engine
from search.engine.events import Event
from search.engine.loop import run as run_loop
from search.engine.tree import Tree
from search.teams import get_team
from search.teams.rules.planning.recipe import Recipe, recipe_of
from tests.teams import rules_problems as P

# warm children (sandbox "none": forked from a zygote that has imported torch), no fuzzing or profile: the subject
# is how the search ends
FAST = {"device": "cpu", "timing_runs": 3, "warmup_runs": 1, "correctness_trials": 1, "baselines": ["eager"],
        "roofline": False, "fuzz": "off", "profile": False, "sandbox": "none"}


def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    from kernels import evaluate as kernels_evaluate

    return kernels_evaluate(problem, candidate, {**FAST, **settings}).to_dict()


@pytest.mark.slow
def test_an_exhausted_rules_team_finishes_the_run_with_search_space_exhausted() -> None:
    events: list[Event] = []
    tree = Tree(P.MATMUL, {"device": "cpu", "seed": 0}, root_source=reference_candidate(P.MATMUL))
    engine = Engine(tree, get_team("rules", {"eps": 0.0, "sandbox": "none"}), evaluate, events.append)
    summary = run_loop(engine, budget=8)
    attempts = [n for n in tree if n.parent is not None]
    # A matmul on the CPU has two moves (torch.compile default / max-autotune); both are tried and evaluated,
    # then the team finds nothing from any node it sees, and the run ends there, well within its budget.
    assert {recipe_of(n.source) for n in attempts if n.verdict not in ("exhausted",)} == {
        Recipe(compile_mode="default"), Recipe(compile_mode="max-autotune-no-cudagraphs")}
    assert summary.status == "finished" and summary.stop_reason.startswith(SEARCH_EXHAUSTED + ": ")
    assert "nothing left to try from node" in summary.stop_reason
    exhausted = [n for n in attempts if n.verdict == "exhausted"]
    assert len(exhausted) == 1 and exhausted[0].id == max(n.id for n in attempts)  # the last, and the only one
    assert not [n for n in attempts if n.verdict == "agent_error"]  # no attempt wasted on "nothing left"
    assert len(attempts) == 3 < 8
    assert engine.finish_reason(None).reason == summary.stop_reason
    assert engine.schedule(4, 0.0) == ([], SEARCH_EXHAUSTED)  # nothing starts after it
    assert events[-1].type == "run.status" and events[-1].data["reason"] == summary.stop_reason
