"""The bundled sample problems load, run on CPU, and match index.json and the README."""

from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn

PROBLEMS_DIR = Path(__file__).resolve().parents[2] / "examples" / "problems"
PROBLEM_FILES = sorted(p.relative_to(PROBLEMS_DIR).as_posix() for p in PROBLEMS_DIR.glob("level*/*.py"))
MAX_INPUT_BYTES = 100 * 1024 * 1024


def load_problem(rel_path: str) -> ModuleType:
    """Import one problem file by path, under a unique module name, without touching sys.path."""
    path = PROBLEMS_DIR / rel_path
    name = "sample_problem_" + rel_path.replace("/", "_").removesuffix(".py")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, f"cannot import {path}"
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def read_index() -> list[dict]:
    return json.loads((PROBLEMS_DIR / "index.json").read_text())


def test_it_has_four_to_six_problems_per_level():
    for level in ("level1", "level2", "level3"):
        count = sum(1 for f in PROBLEM_FILES if f.startswith(level + "/"))
        assert 4 <= count <= 6, f"{level} has {count} problems, expected 4-6"


def test_it_lists_exactly_the_problem_files_in_index_json():
    index = read_index()
    paths = [entry["path"] for entry in index]
    assert len(paths) == len(set(paths)), "index.json lists a path twice"
    assert sorted(paths) == PROBLEM_FILES
    for entry in index:
        assert set(entry) == {"path", "level", "name", "description"}, entry
        assert entry["level"] == int(entry["path"].split("/")[0].removeprefix("level")), entry
        assert entry["name"].strip() and entry["description"].strip(), entry


def test_it_lists_every_problem_in_the_readme():
    readme = (PROBLEMS_DIR / "README.md").read_text()
    missing = [f for f in PROBLEM_FILES if f"`{f}`" not in readme]
    assert not missing, f"README.md does not list {missing}"


@pytest.mark.parametrize("rel_path", PROBLEM_FILES)
def test_it_is_in_kernelbench_format(rel_path: str):
    tree = ast.parse((PROBLEMS_DIR / rel_path).read_text())
    docstring = ast.get_docstring(tree)
    assert docstring and "\n" not in docstring, "needs a one-line module docstring"
    names = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    assert {"Model", "get_inputs", "get_init_inputs"} <= names
    constants = [node for node in tree.body if isinstance(node, ast.Assign)]
    assert constants, "needs module-level size constants"


@pytest.mark.parametrize("rel_path", PROBLEM_FILES)
def test_it_runs_forward_with_finite_output(rel_path: str):
    torch.manual_seed(0)
    module = load_problem(rel_path)
    model = module.Model(*module.get_init_inputs())
    assert isinstance(model, nn.Module)
    inputs = module.get_inputs()
    assert isinstance(inputs, list) and inputs
    assert all(isinstance(t, torch.Tensor) and t.dtype == torch.float32 for t in inputs)
    assert sum(t.numel() * t.element_size() for t in inputs) < MAX_INPUT_BYTES
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    assert out.numel() > 0
    assert torch.isfinite(out).all(), f"{rel_path} produced non-finite values"
