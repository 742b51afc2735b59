"""The rules team's exact rewrites (search.teams.rules.rewrites.passes): each fires where its precondition holds, and only
there; the candidate it renders matches the reference numerically on the CPU (eval mode, as the harness builds
models), keeps the reference's state_dict, follows load_state_dict, .to() and training mode; the moves list them
first and compose them with fusions; the debug role undoes them."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from search.teams.rules.analysis.facts import Facts, facts_of
from search.teams.rules.analysis.forward import Analysis, analyse
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.planning.moves import candidate_moves, fixes
from search.teams.rules.planning.recipe import REWRITES, Recipe, recipe_of
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rewrites.passes import applicable, variants
from tests.teams import rewrite_problems as R
from tests.teams.samples import problems


def traced(name: str) -> tuple[Analysis, Facts]:
    a = analyse(getattr(R, name))
    return a, facts_of(a, *variants(a))


def candidate(name: str, recipe: Recipe, tmp_path: Path) -> ModuleType:
    a = analyse(getattr(R, name))
    source = render(getattr(R, name), recipe, a, name).source
    assert recipe_of(source) == recipe
    path = tmp_path / f"{name.lower()}_{abs(hash(recipe))}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


def build(name: str, module: ModuleType, seed: int = 0) -> tuple[torch.nn.Module, torch.nn.Module]:
    """The reference and the candidate as the harness builds them: same seed, then eval mode."""
    p = load_problem(getattr(R, name))
    torch.manual_seed(seed)
    ref = p.model_class(*p.init_inputs()).eval()
    torch.manual_seed(seed)
    new = module.ModelNew(*p.init_inputs()).eval()
    return ref, new


def outputs(model: torch.nn.Module, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    return list(out) if isinstance(out, tuple) else [out]


def assert_same(name: str, ref: torch.nn.Module, new: torch.nn.Module, seeds: int = 3) -> None:
    p = load_problem(getattr(R, name))
    for seed in range(seeds):
        torch.manual_seed(100 + seed)
        inputs = p.inputs()
        for want, got in zip(outputs(ref, inputs), outputs(new, inputs), strict=True):
            assert got.shape == want.shape and got.dtype == want.dtype
            scale = float(want.abs().max()) or 1.0
            assert torch.allclose(got, want, atol=1e-5 * scale, rtol=1e-4), (got - want).abs().max()


@pytest.mark.parametrize("name", sorted(R.POSITIVE))
def test_each_rewrite_fires_and_its_candidate_matches_the_reference(name: str, tmp_path: Path) -> None:
    a, facts = traced(name)
    expected = R.POSITIVE[name]
    assert set(expected) <= set(facts.rewrites), facts.rewrites
    for names in [expected, *[(n,) for n in expected]]:
        module = candidate(name, Recipe(rewrites=names), tmp_path)
        ref, new = build(name, module)
        assert ref.state_dict().keys() == new.state_dict().keys()
        for key, value in ref.state_dict().items():  # the folded weights are extra, non-persistent buffers
            assert torch.equal(value, new.state_dict()[key]), key
        assert_same(name, ref, new)


@pytest.mark.parametrize("name", sorted(R.NEGATIVE))
def test_no_rewrite_fires_where_its_precondition_fails(name: str) -> None:
    a, facts = traced(name)
    assert R.NEGATIVE[name] not in facts.rewrites, facts.rewrites
    assert a.graph_module is not None and R.NEGATIVE[name] not in applicable(a.graph_module)


def _forward(source: str) -> str:
    return source[source.index("def _fused_forward"):]


def test_the_rewritten_forwards_drop_the_ops_they_fold(tmp_path: Path) -> None:
    def forward(name: str, names: tuple[str, ...]) -> str:
        return _forward(render(getattr(R, name), Recipe(rewrites=names), analyse(getattr(R, name))).source)

    gemm = forward("FOLD_GEMM_AFFINE", ("fold-affine",))
    assert "linear(x, _fold0_weight, _fold0_bias)" in gemm and " * " not in gemm and " / " not in gemm
    assert "relu" in gemm  # not affine: stays
    pools = forward("FOLD_THROUGH_POOLS", ("fold-affine",))
    assert "pool = self.pool(conv_transpose3d)" in pools and "max_pool = self.max_pool(conv2d)" in pools
    assert pools.count(" * ") == 1 and "max_pool * -3.0" in pools  # a negative scale does not commute with max
    bn = forward("FOLD_BN", ("fold-bn",))
    assert "self.bn" not in bn and "self.bn1" not in bn and "conv2d(x, _fold0_weight, _fold0_bias" in bn
    gemv = forward("GEMM_TO_GEMV", ("drop-redundant", "gemm-to-gemv"))
    assert "_gemv0_weight" in gemv and "max" not in gemv and "logsumexp" not in gemv and "mean" not in gemv
    assert re.search(r"linear\(x, _gemv0_weight, _gemv0_bias\)", gemv) and "dropout" not in gemv
    compiled = render(R.FOLD_BN, Recipe(rewrites=("fold-bn",), compile_mode="default"), analyse(R.FOLD_BN)).source
    assert 'torch.compile(self._fused_forward, mode="default")' in compiled  # the rewritten forward is compiled
    diag = forward("DIAG_BROADCAST", ("diag-broadcast",))
    assert "diag" not in diag and "matmul" not in diag and "@" not in diag and "unsqueeze(-1)" in diag
    drop = forward("DROP_REDUNDANT", ("drop-redundant",))
    assert "softmax" not in drop and "ones_like" in drop and "relu" not in drop and "hardtanh" not in drop
    assert drop.count("torch.clamp(") == 1 and drop.count("tril(") == 2 and ".sum(" not in drop
    assert ".mean(" not in drop and "amax * 0.0" in drop


def test_a_folded_model_follows_load_state_dict_to_and_training_mode(tmp_path: Path) -> None:
    module = candidate("FOLD_BN", Recipe(rewrites=("fold-bn",)), tmp_path)
    ref, new = build("FOLD_BN", module)
    other, _ = build("FOLD_BN", module, seed=7)
    with torch.no_grad():  # other running statistics too, so the fold must be recomputed
        other.bn.running_mean.uniform_(-2.0, 2.0)
    new.load_state_dict(other.state_dict())
    assert_same("FOLD_BN", other, new)
    ref, new = other.double(), new.double()  # the folded buffers follow .to()
    assert new._fold0_weight.dtype == torch.float64
    p = load_problem(R.FOLD_BN)
    torch.manual_seed(3)
    inputs = [x.double() for x in p.inputs()]
    assert torch.allclose(outputs(ref, inputs)[0], outputs(new, inputs)[0], atol=1e-5)
    ref.train()
    new.train()  # batch statistics: the reference forward runs, and gradients reach the parameters
    torch.manual_seed(4)
    inputs = [x.double() for x in p.inputs()]
    want, got = ref(*inputs), new(*inputs)
    assert torch.allclose(got, want, atol=1e-9)
    got.sum().backward()
    assert new.conv.weight.grad is not None


def test_rewrite_moves_come_first_and_compose_with_fusions() -> None:
    _, facts = traced("FOLD_CONV_AFFINE")
    all_moves = candidate_moves(Recipe(), facts, "cpu")
    # the rewrite moves first: conv-to-window-sums (the conv is only averaged over its map) ahead of the rest
    assert [m.name for m in all_moves][:2] == ["conv-to-window-sums", "fold-affine"]
    moves = all_moves[1:]
    assert moves[0].name == "fold-affine" and moves[0].recipe == Recipe(rewrites=("fold-affine",))
    assert "Fold the scalar and per-output-channel" in moves[0].instruction and "conv -> mul(3.0)" in moves[0].instruction
    assert [m.name for m in moves].index("fuse-all") > 0
    after = candidate_moves(moves[0].recipe, facts, "cpu")
    assert "fold-affine" not in [m.name for m in after]
    gpu = [m.name for m in candidate_moves(moves[0].recipe, facts, "cuda")]
    # fold -> the next rewrite -> compile, then (the forward is conv-dominated) the convolutions' layout and cuDNN moves
    assert gpu[:6] == ["conv-to-window-sums", "compile-max-autotune-no-cudagraphs", "compile-default",
                       "compile-channels-last", "cudnn-autotune", "fuse-all"]
    for device in ("cpu", "cuda"):  # fold, then compile the rest: the compile moves keep the rewrite
        compiled = {m.name: m.recipe for m in candidate_moves(moves[0].recipe, facts, device)}
        assert compiled["compile-default"] == Recipe(rewrites=("fold-affine",), compile_mode="default")
        assert compiled["compile-max-autotune-no-cudagraphs"].rewrites == ("fold-affine",)
    fuse = next(m for m in after if m.name == "fuse-all")
    assert fuse.recipe.rewrites == ("fold-affine",) and fuse.recipe.fused  # the rewritten forward's fusions
    assert [r.summary for r in facts.regions_for(("fold-affine",))] == ["sigmoid"]
    _, gemv = traced("GEMM_TO_GEMV")  # gemm-to-gemv only after the dropout is dropped: alone it is no move
    assert [m.name for m in candidate_moves(Recipe(), gemv, "cpu")][:2] == ["drop-redundant", "fuse-all"]
    assert [m.name for m in candidate_moves(Recipe(rewrites=("drop-redundant",)), gemv, "cpu")][0] == "gemm-to-gemv"
    fused_first = Recipe(fused=tuple(r.index for r in facts.regions), backend="cpp-omp")
    fold_then = next(m for m in candidate_moves(fused_first, facts, "cpu") if m.name == "fold-affine").recipe
    assert fold_then == Recipe(fused=(0,), backend="cpp-omp", rewrites=("fold-affine",))
    # the rewrite is the culprit when the move that added it fails: undoing it gives back the parent, measured already
    assert fixes(fold_then, facts, "incorrect", "", fused_first) == []
    undo = [f.recipe for f in fixes(fold_then, facts, "incorrect", "", None) if f.aspect == "rewrites"]
    assert undo == [fused_first]  # no parent known (e.g. a leader): undo it and fuse the traced forward's fusions
    assert Facts.from_dict(facts.to_dict()) == facts


def test_recipes_name_their_rewrites_in_run_order() -> None:
    recipe = Recipe(rewrites=("drop-redundant", "gemm-to-gemv"), compile_mode="default")
    assert recipe.to_text() == "rewrite=drop-redundant,gemm-to-gemv; compile=default"
    assert Recipe.from_text(recipe.to_text()) == recipe
    assert Recipe().with_(rewrites=("gemm-to-gemv", "fold-bn")).rewrites == ("fold-bn", "gemm-to-gemv")
    with pytest.raises(ValueError, match="unknown rewrite 'fold-everything'"):
        Recipe.from_text("rewrite=fold-everything")
    with pytest.raises(ValueError, match="in that order"):
        Recipe(rewrites=("fold-affine", "fold-bn"))
    assert set(REWRITES) == {"drop-redundant", "diag-broadcast", "fold-bn", "fold-affine", "gemm-to-gemv",
                            "conv-to-window-sums"}


@pytest.mark.slow
def test_a_rewrite_composes_with_a_fused_cpp_kernel(tmp_path: Path) -> None:
    """fold-affine, then the rest (sigmoid) in a C++/OpenMP kernel of the team's own, built with load_inline."""
    module = candidate("FOLD_CONV_AFFINE", Recipe(rewrites=("fold-affine",), fused=(0,), backend="cpp-omp"), tmp_path)
    ref, new = build("FOLD_CONV_AFFINE", module)
    assert_same("FOLD_CONV_AFFINE", ref, new)


SAMPLES = {"examples/level2/gemm_divide_sum_scaling": ("fold-affine", "gemm-to-gemv"),
           "examples/level3/mobile_se_block": ("fold-affine",), "examples/level3/resnet_basic_block": ("fold-bn",),
           "tests/CONV_CHAIN": ("fold-affine",), "tests/LINEAR_SWISH": ("fold-affine",)}


@pytest.mark.parametrize("problem", sorted(SAMPLES))
def test_the_sample_problems_rewritten_match_their_reference(problem: str, tmp_path: Path) -> None:
    """The bundled samples (and the fusion tests' problems) where a rewrite applies, at their own sizes."""
    source = problems()[problem]
    a = analyse(source)
    assert a.graph_module is not None and tuple(applicable(a.graph_module)) == SAMPLES[problem]
    path = tmp_path / "sample_candidate.py"
    path.write_text(render(source, Recipe(rewrites=SAMPLES[problem]), a, problem).source)
    spec = importlib.util.spec_from_file_location("sample_candidate", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    p = load_problem(source)
    torch.manual_seed(0)
    ref = p.model_class(*p.init_inputs()).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs()).eval()
    torch.manual_seed(5)
    inputs = p.inputs()
    (want,), (got,) = outputs(ref, inputs), outputs(new, inputs)
    scale = float(want.abs().max()) or 1.0
    assert torch.allclose(got, want, atol=1e-5 * scale, rtol=1e-4), (got - want).abs().max()


def play_first_move(source: str, tmp_path: Path) -> dict:
    """Run `python -m search run --team rules` on the problem (budget 1, CPU, children forked warm without
    bubblewrap): its tracing child, first move and the real evaluator (kernels, CPU); the tree's first node."""
    problem = tmp_path / "problem.py"
    problem.write_text(source)
    tree_file = tmp_path / "tree.json"
    done = subprocess.run(
        [sys.executable, "-m", "search", "run", str(problem), "--team", "rules", "--budget", "1", "--device", "cpu",
         "--timing-runs", "5", "--no-compile-baseline", "--out", str(tree_file),
         "--sandbox", "none"],  # warm children (no bubblewrap): the subject is the move, not isolation
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return {n["id"]: n for n in json.loads(tree_file.read_text())["nodes"]}[1]


@pytest.mark.slow
def test_the_team_plays_a_fold_first_and_the_harness_passes_it(tmp_path: Path) -> None:
    """Through the real path: `python -m search run --team rules` traces the problem in a harness child, plays the
    fold as its first move and the real evaluator (kernels, CPU) judges the candidate correct."""
    first = play_first_move(R.FOLD_GEMM_AFFINE, tmp_path)
    assert "Fold the scalar and per-output-channel affine ops" in first["instruction"]
    assert recipe_of(first["source"]) == Recipe(rewrites=("fold-affine",))
    assert first["verdict"] == "pass", first["reasons"]
    assert first["result"]["correctness"]["max_abs_error"] < 1e-4
