"""Context windows pinned to the paper's definitions, and their rendering under a token budget."""

from __future__ import annotations

import pytest

from search.engine.context import build_window, estimate_tokens, window_members
from search.engine.node import Node
from search.engine.tree import Tree
from tests.engine.helpers import make_tree

P, F = "pass", "build_error"


@pytest.fixture
def tree() -> Tree:
    t = make_tree([
        (0, None, P, 10.0),
        (1, 0, P, 8.0), (2, 0, P, 5.0), (3, 0, F, None),
        (4, 1, P, 7.0), (5, 1, F, None),
        (6, 2, P, 4.0), (7, 2, P, 4.5),
        (8, 3, P, 6.0),
        (9, 4, P, 3.0),
    ])
    # an attempt still in flight under i=1: it has nothing to show yet, so no window holds it
    t.nodes[10] = Node(id=10, parent=1, attempt=10, role="plan+code", status="coding")
    return t


def members(tree: Tree, role: str, target: int, top_r: int = 3) -> set[int]:
    return {item.node.id for item in window_members(tree, role, target, top_r)}


def test_plan_window_is_i_root_children_and_top_r_of_the_leaderboard(tree):
    # D(1) = {4, 5}; C by runtime = 9 (3.0), 6 (4.0), 7 (4.5), 2, 8, 4, 1 -> Top-3 = {9, 6, 7}
    assert members(tree, "plan", 1) == {1, 0, 4, 5, 9, 6, 7}
    assert members(tree, "plan", 1, top_r=1) == {1, 0, 4, 5, 9}


def test_code_window_is_i_root_children_and_children_of_siblings(tree):
    # S(1) = {2, 3}; their children = {6, 7} ∪ {8}
    assert members(tree, "code", 1) == {1, 0, 4, 5, 6, 7, 8}


def test_debug_window_is_i_root_and_siblings(tree):
    assert members(tree, "debug", 5) == {5, 0, 4}
    assert members(tree, "debug", 1) == {1, 0, 2, 3}


def test_windows_around_the_root_hold_it_once(tree):
    items = window_members(tree, "plan", 0)
    assert [i.node.id for i in items].count(0) == 1
    assert {i.node.id for i in items} == {0, 1, 2, 3, 9, 6, 7}
    assert members(tree, "debug", 0) == {0}


def test_without_memory_every_window_is_i_and_root_alone(tree):
    """Best-of-K's independent samples: nothing of the earlier attempts (children, leaders, siblings)."""
    for role in ("plan", "code", "debug"):
        assert {it.node.id for it in window_members(tree, role, 0, memory=False)} == {0}
        assert {it.node.id for it in window_members(tree, role, 1, memory=False)} == {1, 0}
    assert members(tree, "plan", 0) != {0}  # with memory the root's window holds its children
    text = build_window(tree, "plan", 0, memory=False).render()
    assert "a child of i" not in text and "leaderboard" not in text and "node 1," not in text


def test_the_plan_window_lists_what_attempts_in_flight_from_i_were_asked_to_do(tree):
    tree[10].instruction = "tile the reduction in shared memory"
    tree.nodes[11] = Node(id=11, parent=1, attempt=11, role="plan+code", status="planning")  # not planned yet
    tree.nodes[12] = Node(id=12, parent=1, attempt=12, role="plan+code", status="planning")  # the window's own
    tree[12].instruction = "its own earlier plan"
    items = window_members(tree, "plan", 1, attempt_id=12)
    assert [it.node.id for it in items if it.relation == "in-flight"] == [10]
    text = build_window(tree, "plan", 1, attempt_id=12).render()
    assert "## being tried (in flight from node 1, do not repeat it): node 10" in text
    assert "Instruction: tile the reduction in shared memory" in text and "its own earlier plan" not in text
    # only the plan window, and not without memory (independent samples know nothing of each other)
    for role in ("code", "debug"):
        assert all(it.relation != "in-flight" for it in window_members(tree, role, 1))
    assert all(it.relation != "in-flight" for it in window_members(tree, "plan", 1, memory=False))


def test_target_and_root_come_first_with_their_relations(tree):
    items = window_members(tree, "code", 4)
    assert [(i.node.id, i.relation) for i in items[:2]] == [(4, "target"), (0, "root")]
    assert {i.node.id: i.relation for i in items} == {4: "target", 0: "root", 9: "child"}
    around_1 = {i.node.id: i.relation for i in window_members(tree, "code", 1)}
    assert [around_1[k] for k in (4, 5, 6, 7, 8)] == ["child", "child"] + ["sibling-child"] * 3


def test_render_shows_everything_without_a_budget(tree):
    for n in tree:
        n.source = f"# source of node {n.id}\n" + "x = 1\n" * 40
    text = build_window(tree, "plan", 1).render()
    for k in (1, 0, 4, 5, 9, 6, 7):
        assert f"node {k}," in text


def test_render_summarizes_then_drops_the_least_relevant_but_never_i_or_root(tree):
    for n in tree:
        n.source = f"# source of node {n.id}\n" + "".join(f"v{n.id}_{k} = {k}\n" for k in range(60))
    window = build_window(tree, "plan", 1)
    full = window.render()
    tight = window.render(token_budget=estimate_tokens(full) // 3)
    assert "# source of node 1" in tight and "# source of node 0" in tight
    assert len(tight) < len(full)
    tiniest = window.render(token_budget=10)
    assert "# source of node 1" in tiniest and "# source of node 0" in tiniest
    assert "left out to fit the prompt budget" in tiniest
    assert "node 7," not in tiniest  # the last leaderboard entry goes first


def test_failed_targets_show_their_logs_for_the_debugger(tree):
    tree.nodes[5].result = {"logs": {"build": "error: expected ';' before '}' token", "run": ""}}
    tree.nodes[5].reasons = ["build failed"]
    text = build_window(tree, "debug", 5).render()
    assert "expected ';'" in text and "Reasons: build failed" in text


def test_feedback_from_a_rejected_answer_is_rendered(tree):
    window = build_window(tree, "plan", 1)
    window.feedback = ["no span is marked"]
    assert "previous answer was rejected" in window.render() and "no span is marked" in window.render()


def test_unknown_roles_are_refused(tree):
    with pytest.raises(ValueError, match="plan"):
        window_members(tree, "review", 1)
