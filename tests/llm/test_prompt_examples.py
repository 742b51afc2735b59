"""The worked examples the system prompt shows (search.teams.llm.prompts.examples): each is a complete candidate
for its tiny reference. The CPU one builds and passes through the real harness; the Triton one runs under Triton's
interpreter where Triton is installed; the CUDA one (no GPU here) is parsed and checked for its pieces."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from search.engine.context import build_window
from search.engine.tree import Tree
from search.engine.win_class import CUSTOM_KERNEL, classify
from search.teams.llm.prompts import code, debug, plan, single
from search.teams.llm.prompts.examples import CPP, CUDA, EXAMPLES, REFERENCE, TRITON, example_for

PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()
ROOT = Path(__file__).resolve().parents[2]


def forward_args(source: str, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "forward":
                    return [a.arg for a in item.args.args]
    raise AssertionError(f"no {cls}.forward")


def called(source: str) -> set[str]:
    return {n.func.id if isinstance(n.func, ast.Name) else n.func.attr
            for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute))}


@pytest.mark.parametrize("target", ["cpp", "cuda", "triton"])
def test_each_example_is_a_short_complete_candidate_for_its_reference(target: str) -> None:
    source = EXAMPLES[target]
    assert 25 <= len(source.splitlines()) <= 50
    assert forward_args(source, "ModelNew") == forward_args(REFERENCE, "Model") == ["self", "a", "b"]
    # the engine classes its win as a custom kernel (search.engine.win_class), not configuration
    assert classify(source, [], REFERENCE) == CUSTOM_KERNEL


def test_the_cuda_example_builds_a_kernel_with_load_inline() -> None:
    assert "load_inline" in called(CUDA) and "__global__ void add_kernel" in CUDA
    assert "getCurrentCUDAStream" in CUDA and "cuda_sources=CUDA_SOURCE" in CUDA


def test_the_triton_and_cpp_examples_have_their_pieces() -> None:
    tree = ast.parse(TRITON)
    jitted = [f for f in tree.body if isinstance(f, ast.FunctionDef)
              and any(ast.unparse(d) == "triton.jit" for d in f.decorator_list)]
    assert [f.name for f in jitted] == ["add_kernel"] and "add_kernel[" in TRITON
    assert "load_inline" in called(CPP) and "cuda_sources" not in CPP and "-fopenmp" in CPP


@pytest.mark.parametrize("target", ["cpp", "cuda", "triton"])
def test_the_targets_example_is_in_every_roles_stable_system_prompt(target: str) -> None:
    tree = Tree(PROBLEM, {"target": target}, root_source=PROBLEM.replace("class Model(", "class ModelNew("))
    first, other = build_window(tree, "plan", 0), build_window(tree, "debug", 0)
    for module in (plan, code, debug, single):
        system = module.system(first, target)
        assert example_for(target) in system and system == module.system(other, target)
        assert system.index(example_for(target)) < system.index("The reference problem (KernelBench format)")
        others = [t for t in EXAMPLES if t != target]
        assert not any(EXAMPLES[t] in system for t in others)


def test_the_torch_target_has_no_kernel_example() -> None:
    assert example_for("torch") == ""


@pytest.mark.slow
def test_the_cpu_example_builds_and_passes_through_the_real_harness() -> None:
    from kernels import evaluate

    result = evaluate(REFERENCE, CPP, {"device": "cpu", "timing_runs": 3, "warmup_runs": 1, "correctness_trials": 2,
                                       "baselines": ["eager"], "roofline": False, "fuzz": "off",
                                       "reuse_results": False,  # really built, not a stored result
                                       "sandbox": "none"})  # a warm child: the example is the subject
    assert result.verdict == "pass", (result.reasons, result.logs)
    assert "no_custom_kernel" not in result.flags


@pytest.mark.slow
def test_the_triton_example_matches_its_reference_under_the_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    (tmp_path / "reference.py").write_text(REFERENCE)
    (tmp_path / "candidate.py").write_text(TRITON)
    script = textwrap.dedent("""
        import torch, reference, candidate
        torch.manual_seed(0)
        for shape in ((64, 1024), (3, 333)):
            a, b = torch.randn(shape), torch.randn(shape)
            want = reference.Model()(a, b)
            got = candidate.ModelNew()(a, b)
            assert got.shape == want.shape and torch.allclose(got, want, atol=1e-2, rtol=1e-2), shape
        print("matches")
    """)
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "matches" in done.stdout, done.stderr[-3000:]
