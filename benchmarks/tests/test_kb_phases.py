"""benchmarks/kb_phases.py: where the evaluation time went, per harness phase, split into references and attempts,
with the seconds that compiles spent off the device lock (kernels.child.device_lock) as a row of their own."""

from __future__ import annotations

from benchmarks import kb_phases
from search.engine.node import Node
from search.engine.tree import Tree


def judged(i: int, parent: int | None, phases: dict[str, float], aside_s: float | None = None) -> Node:
    environment = {"compile_aside": {"compiles": 1, "aside_s": aside_s}} if aside_s is not None else {}
    wall = sum(phases.values())
    return Node(id=i, parent=parent, attempt=i, role="root" if parent is None else "plan+code", source="# x\n",
                status="done", verdict="pass", runtime_ms=1.0,
                result={"phases": [{"phase": k, "seconds": v} for k, v in phases.items()], "wall_s": wall,
                        "environment": environment})


def test_phases_are_summed_per_kind_and_the_seconds_aside_are_reported_inside_build() -> None:
    tree = Tree("import torch\n", {}, nodes=[
        judged(0, None, {"reference": 40.0, "baselines": 20.0}),
        judged(1, 0, {"build": 30.0, "waiting for the device": 10.0, "timing": 1.0}, aside_s=25.0),
        judged(2, 0, {"build": 10.0, "waiting for the device": 30.0, "timing": 1.0}),
    ])
    found = kb_phases.phase_seconds([tree])
    assert found["reference"]["reference"] == [40.0] and found["reference"]["wall"] == [60.0]
    assert found["attempt"]["waiting for the device"] == [10.0, 30.0]
    assert found["attempt"][kb_phases.ASIDE] == [25.0]
    text, data = kb_phases.table(found)
    assert data["attempt"]["waiting for the device"]["share"] == 40.0 / 82.0
    assert data["attempt"]["build"]["median_s"] == 20.0
    assert f"| attempt | {kb_phases.ASIDE} | 1 | 25.0 | 25 |" in text
