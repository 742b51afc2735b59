"""A team that declines a node ("nothing left to try from node N", agents.BranchDeclined): the attempt is free (not
counted against the budget), it is recorded with verdict "declined", and no policy selects that node again."""

from __future__ import annotations

from kernels.parent.problem import reference_candidate
from search.engine.engine import Engine
from search.engine.events import EventLog
from search.engine.loop import run as search_loop
from search.engine.policies import declined
from search.engine.tree import Tree
from search.teams import get_team
from tests.engine.helpers import PROBLEM, script_evaluate


def run(script: str, budget: int, **options):
    tree = Tree(PROBLEM, {"seed": 0, "budget": budget}, root_source=reference_candidate(PROBLEM))
    engine = Engine(tree, get_team("scripted", {"script": script, **options}), script_evaluate, EventLog())
    return tree, search_loop(engine)


def test_a_declined_attempt_is_free_and_its_node_is_not_selected_again():
    # greedy: node 1 (x0.5) is the best; the team declines it (attempt 2); the next pick is the best node that is
    # not declined (the reference), and the budget of 3 buys three evaluated attempts.
    tree, summary = run("ok:0.5,decline,ok:0.9,ok:0.8", budget=3, policy="greedy")
    assert [n.id for n in tree if n.parent is not None] == [1, 2, 3, 4]
    no2 = tree.nodes[2]
    assert no2.parent == 1 and no2.status == "failed" and no2.verdict == "declined" and not no2.debuggable
    assert "nothing left to try from node 1" in no2.reasons[0]
    assert declined(tree, 1) and tree.nodes[3].parent == 0 and tree.nodes[4].parent == 3
    assert tree.attempts == summary.attempts == 3 and "budget of 3 attempts spent" in summary.stop_reason
    assert summary.best is not None and summary.best.id == 1  # a declined node keeps its result


def test_the_adaptive_policy_never_returns_to_a_declined_node():
    tree, summary = run("ok:0.5,ok:0.7,decline,ok:0.9,ok:1.1,ok:0.6", budget=8, eps=0.5)
    refused = {n.parent for n in tree if n.verdict == "declined"}
    assert refused
    for node in tree:
        if node.parent in refused:
            # every child of a declined node was started before (or as) its decline
            first_decline = min(k.id for k in tree.children(node.parent) if k.verdict == "declined")
            assert node.id <= first_decline
    assert tree.attempts == summary.attempts == 8 and "budget of 8 attempts spent" in summary.stop_reason
    assert len([n for n in tree if n.parent is not None]) == 8 + len([n for n in tree if n.verdict == "declined"])


def test_a_run_whose_every_node_is_declined_ends_with_nothing_selectable():
    tree, summary = run("ok:0.5,decline,decline", budget=10, policy="greedy")
    # node 1 then node 0 are declined in turn; nothing is left to select and only one attempt was counted
    assert tree.attempts == 1 and summary.status == "finished"
    assert "nothing left to select" in summary.stop_reason
