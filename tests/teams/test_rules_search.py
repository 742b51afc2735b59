"""End to end: `python -m search run --team rules` with the real evaluator (kernels) on the CPU finds a
correct candidate with its own fused C++ kernel, planned through anchors like an LLM team's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from search.engine.anchors import parse_anchors
from search.teams.rules.planning.recipe import recipe_of

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]

PROBLEM = '''import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x, residual):
        x = (x - residual) * 0.5 + self.bias
        return torch.tanh(F.leaky_relu(x, 0.2))


def get_inputs():
    return [torch.randn(4, 16, 32, 32), torch.randn(4, 16, 32, 32)]


def get_init_inputs():
    return [16]
'''


def test_it_finds_a_correct_fused_kernel_with_the_real_evaluator(tmp_path: Path) -> None:
    problem = tmp_path / "chain.py"
    problem.write_text(PROBLEM)
    tree_file = tmp_path / "tree.json"
    done = subprocess.run(
        [sys.executable, "-m", "search", "run", str(problem), "--team", "rules", "--budget", "1", "--device", "cpu",
         "--timing-runs", "5", "--no-compile-baseline", "--out", str(tree_file),
         "--sandbox", "none"],  # warm children (no bubblewrap): the subject is the search, not isolation
        cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    nodes = {n["id"]: n for n in json.loads(tree_file.read_text())["nodes"]}
    first = nodes[1]
    assert first["parent"] == 0 and first["role"] == "plan+code"
    # From the root, the generated part replaces its ModelNew stub: one span below the untouched reference.
    assert len(parse_anchors(first["anchored_source"])) == len(first["instructions"]) == 1
    assert "grounding: span 1 -> lines" in first["agent_log"]  # the engine checked the fill against the skeleton
    assert first["instruction"] and "Fuse" in first["instruction"] and "C++/OpenMP" in first["instruction"]
    assert first["verdict"] == "pass", first["reasons"]
    assert "no_custom_kernel" not in (first["result"]["flags"] or [])
    recipe = recipe_of(first["source"])
    assert recipe is not None and recipe.fused == (0,) and recipe.backend == "cpp-omp"
    side = first["result"]["side_by_side"]  # timed beside the reference; on a busy host it may not be measurable
    assert first["runtime_ms"] > 0 and side["speedup"] > 0
    assert (first["speedup_vs_eager"] is not None) == bool(side["measurable"]), side
