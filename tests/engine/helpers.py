"""Shared test helpers: a small problem, an evaluator that reads the scripted team's marks, hand-built trees."""

from __future__ import annotations

import math
from typing import Any

from search.engine.node import Node
from search.engine.tree import Tree
from tests.plugins.scripted import FACTOR_RE, FAILURE_TAG

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
'''

BASE_MS = 10.0


def script_evaluate(problem_source: str, candidate_source: str, settings: dict[str, Any]) -> dict[str, Any]:
    """An evaluator for engine tests: build_error on the scripted failure tag, else a runtime that is
    BASE_MS times every scripted runtime factor along the candidate's lineage (the comments accumulate)."""
    if FAILURE_TAG in candidate_source:
        return {"verdict": "build_error", "reasons": ["SyntaxError: invalid syntax (scripted)"],
                "logs": {"build": "SyntaxError", "run": ""}, "timing": None,
                "speedup_vs_eager": None, "speedup_vs_compile": None}
    runtime = BASE_MS * math.prod(float(f) for f in FACTOR_RE.findall(candidate_source))
    return {"verdict": "pass", "reasons": [], "logs": {"build": "", "run": ""},
            "timing": {"median_ms": runtime}, "speedup_vs_eager": BASE_MS / runtime,
            "speedup_vs_compile": BASE_MS * 0.8 / runtime}


def make_tree(spec: list[tuple[int, int | None, str, float | None]]) -> Tree:
    """Hand-built tree: [(id, parent, verdict, runtime_ms)], all finished; the first entry is the root."""
    nodes = []
    for attempt, (node_id, parent, verdict, runtime) in enumerate(spec):
        status = "done" if verdict == "pass" else "failed"
        role = "root" if parent is None else "plan+code"
        nodes.append(Node(id=node_id, parent=parent, attempt=attempt, role=role, source=f"# node {node_id}\n",
                          status=status, verdict=verdict, runtime_ms=runtime if verdict == "pass" else None))
    return Tree(PROBLEM, {"seed": 0}, nodes=nodes)
