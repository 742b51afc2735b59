"""An attempt a person produced carries the record of it: the pin that chose its parent and the hints its plan
received land on the child as "steered" entries with the original who and when; the engine's own review entry and
a timed-out review do not make an attempt steered; hints are not received twice through those records."""

from __future__ import annotations

from typing import Any

from search.engine.steering import act, hints_for, is_steered, on_start
from search.engine.tree import Tree


class Host:
    def __init__(self, tree: Tree) -> None:
        self.tree = tree
        self.events: list[tuple[str, Any]] = []

    def emit(self, type_: str, node: int | None = None, **data: Any) -> None:
        self.events.append((type_, node))


def finished_tree() -> tuple[Tree, Host]:
    tree = Tree("class Model: pass\n", root_source="x = 1\n")
    root = tree.root
    root.status, root.verdict, root.runtime_ms, root.source = "done", "pass", 1.0, "x = 1\n"
    return tree, Host(tree)


def test_a_pin_and_a_hint_mark_the_child_they_produced() -> None:
    tree, host = finished_tree()
    pin = act(host, "ada", "pin", tree.root.id)  # type: ignore[arg-type]
    hint = act(host, "ada", "hint", tree.root.id, text="tile by 128")  # type: ignore[arg-type]
    wide = act(host, "bob", "hint", None, text="keep fp32 accumulators")  # type: ignore[arg-type]
    child = tree.add_child(tree.root.id, "plan+code", status="selected")
    on_start(tree, tree.root.id, child)
    marks = [(e["who"], e["detail"]["by"], e["detail"]["from_node"], e["at"]) for e in child.human]
    assert ("ada", "pin", tree.root.id, pin["at"]) in marks
    assert ("ada", "hint", tree.root.id, hint["at"]) in marks
    assert ("bob", "hint", None, wide["at"]) in marks
    assert is_steered(child.human) and not is_steered(tree.root.human)
    assert tree.meta["steering"]["pins"] == []  # the child consumed the pin
    # the grandchild's plan receives each hint once: the child's records are not hints
    assert len(hints_for(tree, child.id)) == 2


def test_an_attempt_nobody_touched_is_not_steered() -> None:
    tree, _ = finished_tree()
    child = tree.add_child(tree.root.id, "plan+code", status="selected")
    on_start(tree, tree.root.id, child)
    assert child.human == [] and not is_steered(child.human)
    engine_only = [{"who": "STARK", "at": 1.0, "action": "review", "detail": {}},
                   {"who": "timeout", "at": 2.0, "action": "approve", "detail": {}}]
    assert not is_steered(engine_only)
    assert is_steered([*engine_only, {"who": "ada", "at": 3.0, "action": "edit", "detail": {}}])
