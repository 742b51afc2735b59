"""The rules team's convolution layout and configuration moves (search.teams.rules.analysis.convs, .combos.layout_moves):
channels-last follows the rank of the convolutions (4-D NHWC, 5-D NDHWC, none for 1-D) and stays out of a forward
whose `view` breaks in it; cudnn-autotune runs the forward in a cuDNN benchmark scope that keeps and restores every
other flag; both come first on a conv-dominated forward; their candidates match the reference on the CPU, composed
with the rewrites and the harness passes them. A move that failed because of itself is not played again in another
branch of the same tree (search.teams.rules.planning.failures)."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

from kernels.parent.problem import reference_candidate
from search.engine.agents import AgentError
from search.engine.anchors import parse_anchors
from search.engine.context import build_window
from search.engine.grounding import check_filled, check_skeleton
from search.engine.node import Node
from search.engine.tree import Tree
from search.teams.rules import build_team
from search.teams.rules.analysis.facts import Facts, facts_of
from search.teams.rules.analysis.problem import load_problem
from search.teams.rules.planning.anchoring import anchor, fill
from search.teams.rules.planning.failures import Failure, added_parts, failed_here, failure_of, normalized
from search.teams.rules.planning.moves import GPU_FIRST, candidate_moves, changed_aspects, fixes
from search.teams.rules.planning.recipe import Recipe, recipe_of
from search.teams.rules.rendering.candidate import render
from search.teams.rules.rewrites.passes import variants
from search.teams.rules.roles import MemoryTraceStore
from tests.teams.samples import analysis, with_rewrite_problems
from tests.teams.test_rules_kernels import import_candidate
from tests.teams.test_rules_protocol import WARM

LAYOUT = Recipe(channels_last=True, cudnn_autotune=True)
FORMATS = {4: torch.channels_last, 5: torch.channels_last_3d}


@cache
def facts(problem: str) -> Facts:
    """The problem's facts, its rewrite variants' included (traced and rewritten once per problem)."""
    a = analysis(problem, True)
    return facts_of(a, *variants(a))


def names(problem: str, recipe: Recipe = Recipe(), device: str = "cuda") -> list[str]:
    return [m.name for m in candidate_moves(recipe, facts(problem), device)]


def cudnn_flags() -> dict[str, Any]:
    cudnn = torch.backends.cudnn
    return {n: getattr(cudnn, n) for n in inspect.signature(cudnn.flags).parameters if hasattr(cudnn, n)}


def test_channels_last_follows_the_rank_of_the_convolutions() -> None:
    three, two, one = facts("layouts/CONV3D_CHAIN"), facts("tests/CONV_CHAIN"), facts("layouts/CONV1D_TANH")
    assert (three.conv_ranks, two.conv_ranks, one.conv_ranks) == ((5,), (4,), (3,))
    moves = {m.name: m for m in candidate_moves(Recipe(compile_mode="default"), three, "cuda")}
    assert moves["channels-last"].recipe == Recipe(channels_last=True, compile_mode="default")
    assert "channels_last_3d (NDHWC)" in moves["channels-last"].instruction
    assert "5-D inputs" in moves["channels-last"].instruction and "3-D convolutions" in moves["cudnn-autotune"].instruction
    assert "channels_last (NHWC)" in {m.name: m for m in candidate_moves(Recipe(compile_mode="default"), two, "cuda")}[
        "channels-last"].instruction
    # 1-D convolutions have no channels-last format: only the cuDNN move
    one_d = names("layouts/CONV1D_TANH") + names("layouts/CONV1D_TANH", Recipe(compile_mode="default"))
    assert not {"channels-last", "compile-channels-last"} & set(one_d) and "cudnn-autotune" in one_d
    # CUDA only; and a problem with no convolution gets neither
    assert not {"cudnn-autotune", "channels-last"} & set(names("layouts/CONV3D_CHAIN", device="cpu"))
    assert not {"cudnn-autotune", "channels-last"} & set(names("tests/MANY_OPS"))
    assert Facts.from_dict(three.to_dict()) == three


def test_channels_last_stays_out_of_a_forward_whose_view_breaks_in_it() -> None:
    f = facts("layouts/CONV_VIEW_FLATTEN")
    assert f.layout_error and "view" in f.layout_error and "channels_last" in f.layout_error
    assert f.layout_ranks == () and "channels-last" not in names("layouts/CONV_VIEW_FLATTEN")
    assert "cudnn-autotune" in names("layouts/CONV_VIEW_FLATTEN")
    # what the facts predict is what PyTorch does: the forward in channels_last really raises
    p = load_problem(with_rewrite_problems()["layouts/CONV_VIEW_FLATTEN"])
    model = p.model_class(*p.init_inputs()).to(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="view size is not compatible"):
        model(p.inputs()[0].contiguous(memory_format=torch.channels_last))
    assert facts("kb_scale/l3_lenet5").layout_error  # LeNet flattens its conv features with view
    assert facts("layouts/CONV3D_CHAIN").layout_error is None


def test_channels_last_forced_on_a_1d_convolution_touches_only_what_it_can(tmp_path: Path) -> None:
    """The move is not offered there; a recipe forced by hand still renders and runs: the 3-D weights and input stay
    as they are (there is no channels-last format for them), the output equals the reference's."""
    module = candidate("layouts/CONV1D_TANH", LAYOUT, tmp_path)
    assert module._LAYOUTS == FORMATS
    p = load_problem(with_rewrite_problems()["layouts/CONV1D_TANH"])
    torch.manual_seed(0)
    ref = p.model_class(*p.init_inputs()).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs()).eval()
    assert new.conv.weight.is_contiguous()
    x = p.inputs()[0]
    with torch.no_grad():
        assert torch.allclose(new(x), ref(x), atol=1e-5)


def test_on_a_conv_dominated_forward_the_conv_moves_come_before_the_fusions() -> None:
    assert facts("layouts/CONV3D_CHAIN").conv_dominated and not facts("layouts/CONV_THEN_GEMM").conv_dominated
    root = names("layouts/CONV3D_CHAIN")
    assert root[:4] == [*GPU_FIRST, "compile-channels-last", "cudnn-autotune"]  # not compiled yet: both at once
    move = {m.name: m for m in candidate_moves(Recipe(), facts("layouts/CONV3D_CHAIN"), "cuda")}["compile-channels-last"]
    assert move.recipe == Recipe(channels_last=True, compile_mode="default")  # = channels-last from compile(default)
    compiled = names("layouts/CONV3D_CHAIN", Recipe(compile_mode="default"))  # from the best compile node
    assert compiled[:3] == ["channels-last", "cudnn-autotune", "fuse-all"]
    laid = names("layouts/CONV3D_CHAIN", Recipe(compile_mode="default", channels_last=True))
    assert laid[0] == "cudnn-autotune" and "channels-last" not in laid
    # most FLOPs in a GEMM: the conv moves come last, after every fusion
    gemm = names("layouts/CONV_THEN_GEMM", Recipe(compile_mode="default"))
    assert gemm[-2:] == ["channels-last", "cudnn-autotune"] and gemm[0] != "channels-last"


def test_the_cudnn_move_round_trips_and_is_undone_when_it_fails() -> None:
    recipe = Recipe(compile_mode="default", channels_last=True, cudnn_autotune=True)
    assert recipe.to_text() == "channels-last; cudnn-autotune; compile=default"
    assert Recipe.from_text(recipe.to_text()) == recipe
    parent = Recipe(compile_mode="default")
    tuned = parent.with_(cudnn_autotune=True)
    assert changed_aspects(parent, tuned) == {"cudnn"}
    f = facts("layouts/CONV3D_CHAIN")
    assert [x.recipe for x in fixes(recipe.with_(channels_last=False), f, "runtime_error", "", parent)] == []
    assert [x.recipe for x in fixes(tuned, f, "runtime_error", "boom", None) if x.aspect == "cudnn"] == [parent]


def candidate(problem: str, recipe: Recipe, tmp_path: Path) -> ModuleType:
    a = analysis(problem, True)
    source = render(with_rewrite_problems()[problem], recipe, a, problem,
                    dict(variants(a)[1])).source
    assert recipe_of(source) == recipe
    return import_candidate(source, tmp_path / f"cand_{problem.replace('/', '_').lower()}_{abs(hash(recipe))}.py")


@pytest.mark.parametrize(("problem", "rewrites"), [("layouts/CONV3D_CHAIN", ()), ("tests/CONV_CHAIN", ()),
                                                   ("rewrites/FOLD_CONV_TRANSPOSE", ("fold-affine",)),
                                                   ("rewrites/FOLD_BN", ("fold-bn",))])
def test_the_layout_candidates_match_the_reference_on_the_cpu(problem: str, rewrites: tuple[str, ...],
                                                              tmp_path: Path) -> None:
    """Weights converted per rank (5-D: channels_last_3d), the forward inside the cuDNN benchmark scope (seen from
    a hook on the convolution), every cuDNN flag as it was afterwards, outputs equal to the reference's, the folded
    weights still channels-last after load_state_dict."""
    module = candidate(problem, LAYOUT.with_(rewrites=rewrites), tmp_path)
    p = load_problem(with_rewrite_problems()[problem])
    torch.manual_seed(0)
    ref = p.model_class(*p.init_inputs()).eval()
    torch.manual_seed(0)
    new = module.ModelNew(*p.init_inputs()).eval()
    convs = [t for t in (*new.parameters(), *new.buffers()) if t.dim() in FORMATS and t.numel() > 1
             and t.shape[-1] > 1]
    assert convs and all(t.is_contiguous(memory_format=FORMATS[t.dim()]) for t in convs)
    seen: list[bool] = []
    for m in new.modules():
        if isinstance(m, torch.nn.modules.conv._ConvNd):
            m.register_forward_pre_hook(lambda mod, args: seen.append(torch.backends.cudnn.benchmark))
    before = cudnn_flags()
    with torch.no_grad():
        for seed in range(3):
            torch.manual_seed(100 + seed)
            inputs = p.inputs()
            want, got = ref(*inputs), new(*inputs)
            assert cudnn_flags() == before
            assert got.shape == want.shape and got.dtype == want.dtype
            assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
    assert not rewrites or not seen  # a folded forward calls the functional conv on the folded weights
    assert rewrites or (seen and all(seen))
    new.load_state_dict(ref.state_dict())
    assert all(t.is_contiguous(memory_format=FORMATS[t.dim()]) for t in (*new.parameters(), *new.buffers())
               if t.dim() in FORMATS and t.numel() > 1 and t.shape[-1] > 1)


def test_the_cudnn_scope_restores_the_flags_when_the_forward_raises(tmp_path: Path) -> None:
    module = candidate("layouts/CONV3D_CHAIN", Recipe(cudnn_autotune=True), tmp_path)
    p = load_problem(with_rewrite_problems()["layouts/CONV3D_CHAIN"])
    new = module.ModelNew(*p.init_inputs()).eval()
    before = cudnn_flags()
    with pytest.raises(RuntimeError):
        new(torch.randn(2, 5, 4, 4, 4))  # 5 channels for a 3-channel conv
    assert cudnn_flags() == before


def failed(tree: Tree, parent: int, recipe: Recipe, error: str, verdict: str = "runtime_error") -> Node:
    problem = tree.problem_source
    a = analysis(next(k for k, v in with_rewrite_problems().items() if v == problem), True)
    source = render(problem, recipe, a).source
    return tree.add_child(parent, "plan+code", source=source, anchored_source=tree[parent].source, status="done",
                          verdict=verdict, reasons=[error], result={"verdict": verdict, "logs": {"run": error}})


def conv3d_tree() -> Tree:
    problem = with_rewrite_problems()["layouts/CONV3D_CHAIN"]
    a = analysis("layouts/CONV3D_CHAIN", True)
    tree = Tree(problem, {"device": "cuda"}, root_source=reference_candidate(problem))
    tree.root.status, tree.root.verdict, tree.root.runtime_ms = "done", "pass", 2.0
    for mode in ("default", "max-autotune-no-cudagraphs"):
        source = render(problem, Recipe(compile_mode=mode), a).source
        tree.add_child(0, "plan+code", source=source, anchored_source=tree.root.source, status="done", verdict="pass",
                       runtime_ms=1.0)
    return tree


RANK_ERROR = "RuntimeError: required rank 4 tensor to use channels_last format (at ModelNew(*get_init_inputs()), 17)"


def test_a_move_that_broke_is_remembered_by_its_name_and_what_it_adds() -> None:
    tree = conv3d_tree()
    f = facts("layouts/CONV3D_CHAIN")
    node = failed(tree, 1, Recipe(compile_mode="default", channels_last=True), RANK_ERROR)
    found = failure_of(node, f, "cuda", None)
    assert found == Failure("channels-last", "channels-last", node.id,
                            "RuntimeError: required rank N tensor to use channels_last format (at "
                            "ModelNew(*get_init_inputs()), N)")
    assert Failure.from_text(found.to_text()) == found
    # from any other node: channels-last, and conv-epilogue-nhwc (which adds channels-last too), repeat it; nothing else
    moves = candidate_moves(Recipe(compile_mode="max-autotune-no-cudagraphs"), f, "cuda")
    assert {m.name for m in moves if failed_here(m, Recipe(compile_mode="max-autotune-no-cudagraphs"),
                                                 {found.key: found})} == {"channels-last", "conv-epilogue-nhwc"}
    assert normalized("x 0x7f3a 12 3.5\nmore") == "x N N N"
    assert added_parts(Recipe(compile_mode="default"), Recipe(compile_mode="default", fused=(0,), backend="triton")) \
        == "fuse=triton:0"
    # not the move's fault: the machine (out of memory), or no move (a debug fix has no anchored parent source)
    oom = failed(tree, 1, Recipe(compile_mode="default", cudnn_autotune=True), "CUDA out of memory. Tried 2 GiB")
    assert failure_of(oom, f, "cuda", None) is None
    fix = failed(tree, 1, Recipe(compile_mode="default", fused=(0,), backend="triton"), "RuntimeError: bad")
    fix.anchored_source = None
    assert failure_of(fix, f, "cuda", None) is None
    assert failure_of(tree[1], f, "cuda", None) is None  # it passed


@pytest.mark.slow
def test_a_move_that_failed_in_one_branch_is_skipped_in_the_others_and_the_log_says_why() -> None:
    """Through the real plan and debug roles (the tracing child included): channels-last broke under the
    compile(default) node; the debug role on that failure records it (even with no fix to offer), and planning from the max-autotune node (another
    branch, whose window does not show the failure) skips the move and says why, in a new team (another process of
    the same run) too, through the run's store."""
    tree = conv3d_tree()
    node = failed(tree, 1, Recipe(compile_mode="default", channels_last=True), RANK_ERROR)
    store = MemoryTraceStore()
    team = build_team({"seed": 0, "trace_store": store, **WARM})
    device = {"device": "cuda"}
    with pytest.raises(AgentError, match="no untried fix"):  # undoing channels-last gives back its parent
        team.debug.debug(build_window(tree, "debug", node.id, device=device))
    assert any(k.startswith("failed:") for v in store.data.values() for k in v)
    # node 2 has four moves (cudnn-autotune, channels-last, fuse-all, conv-epilogue-nhwc, which adds channels-last too):
    # a new team restored from the store plans one, the first team the other, and nothing is left after them, which
    # says why channels-last and conv-epilogue-nhwc were not played
    for t in (build_team({"seed": 1, "trace_store": store, **WARM}), team):
        child = tree.add_child(2, "plan+code", status="planning")
        window = build_window(tree, "plan", 2, attempt=child.attempt, device=device)
        assert node.id not in {n.id for n in window.nodes}
        plan = t.plan.plan(window)
        assert f"skipped channels-last: it failed in node {node.id} (RuntimeError: required rank N" in plan.text
        recipe = Recipe.from_text(plan.instructions[0].rsplit("[rules: ", 1)[1].rstrip("]"))
        assert not recipe.channels_last, plan.text
        child.source = t.code.code(build_window(tree, "code", 2, attempt=child.attempt, device=device), plan).source
        child.status, child.verdict, child.runtime_ms = "done", "pass", 1.5
    assert {recipe_of(n.source) for n in tree.children(2)} == {Recipe(compile_mode="max-autotune-no-cudagraphs",
                                                                      cudnn_autotune=True),
                                                               Recipe(compile_mode="max-autotune-no-cudagraphs",
                                                                      fused=(0,), backend="triton")}
    child = tree.add_child(2, "plan+code", status="planning")
    with pytest.raises(AgentError, match=f"nothing left to try from node 2 .* skipped channels-last: it failed in "
                                         f"node {node.id} .*skipped conv-epilogue-nhwc: channels-last, whose change it "
                                         f"makes too, failed in node {node.id}"):
        team.plan.plan(build_window(tree, "plan", 2, attempt=child.attempt, device=device))


@pytest.mark.slow
@pytest.mark.parametrize(("problem", "recipe"), [("layouts/CONV3D_CHAIN", LAYOUT),
                                                 ("rewrites/FOLD_CONV_TRANSPOSE", LAYOUT.with_(rewrites=("fold-affine",)))])
def test_the_harness_passes_the_forced_layout_moves_on_the_cpu(problem: str, recipe: Recipe, tmp_path: Path) -> None:
    """The real evaluator (kernels.parent.evaluate: isolated child, correctness trials against the reference) on the
    candidate of the forced moves, 3-D convolutions in channels_last_3d inside the cuDNN benchmark scope."""
    from kernels import EvalSettings, evaluate

    source = with_rewrite_problems()[problem]
    a = analysis(problem, True)
    candidate_source = render(source, recipe, a, problem, dict(variants(a)[1])).source
    assert "_LAYOUTS = {5: torch.channels_last_3d}" in candidate_source
    settings = EvalSettings(cache_dir=str(tmp_path), correctness_trials=3, timing_runs=5, warmup_runs=1,
                            baselines=(), roofline=False, build_timeout_s=300, run_timeout_s=120,
                            memory_limit_mb=4096, fuzz="off", profile=False, **WARM)  # the verdict is the subject
    result = evaluate(source, candidate_source, settings)
    assert result.verdict == "pass", (result.reasons, result.logs)


def test_the_cudnn_move_from_a_compiled_node_is_grounded_in_the_forward_lines() -> None:
    """From compile(default): the spans are the helper (new lines after the kernels section) and the forward's return
    (now inside the scope); the reference above stays untouched (the engine's grounding contract)."""
    problem = "layouts/CONV3D_CHAIN"
    source, a = with_rewrite_problems()[problem], analysis(problem, True)
    old = render(source, Recipe(compile_mode="default"), a, problem).source
    new = render(source, Recipe(compile_mode="default", cudnn_autotune=True), a, problem).source
    anchored, instructions = anchor(old, new, "move", "cudnn-autotune; compile=default", "cudnn-autotune")
    check_skeleton(anchored, old)
    check_filled(anchored, fill(anchored, old, new))
    spans = parse_anchors(anchored)
    assert all(s.begin_line > len(source.splitlines()) for s in spans)  # below the reference
    bodies = "\n".join(s.body for s in spans)
    assert "return self._compiled_forward(x)" in bodies and "_fused_forward(self" not in bodies
    assert "with _cudnn_autotune():" in new and "            return self._compiled_forward(x)" in new


NDHWC = Recipe(channels_last=True, fused=(0,), backend="triton")


def test_a_3d_conv_epilogue_gets_the_ndhwc_combination_move() -> None:
    move = {m.name: m for m in candidate_moves(Recipe(), facts("layouts/CONV3D_CHAIN"), "cuda")}["conv-epilogue-nhwc"]
    assert move.recipe == NDHWC
    assert "conv-epilogue-nhwc" not in names("layouts/CONV_VIEW_FLATTEN")  # the forward breaks in channels-last


@pytest.mark.slow
def test_the_ndhwc_epilogue_matches_the_reference_in_the_triton_interpreter(tmp_path: Path) -> None:
    pytest.importorskip("triton")
    path = tmp_path / "cand_ndhwc.py"
    path.write_text(render(with_rewrite_problems()["layouts/CONV3D_CHAIN"], NDHWC.with_(cudnn_autotune=True),
                           analysis("layouts/CONV3D_CHAIN", True)).source)
    script = f"""
import sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})
from pathlib import Path
import torch
from tests.teams.test_rules_kernels import import_candidate, assert_matches_reference
from tests.teams.samples import with_rewrite_problems
path = Path({str(path)!r})
module = import_candidate(path.read_text(), path)
assert_matches_reference(with_rewrite_problems()["layouts/CONV3D_CHAIN"], module)
x = torch.randn(2, 6, 3, 4, 5).contiguous(memory_format=torch.channels_last_3d)
b = torch.randn(6, 1, 1, 1)
out = getattr(module, [n for n in dir(module) if n.startswith("fused0_")][0])(x, b)
assert out.is_contiguous(memory_format=torch.channels_last_3d) and not out.is_contiguous()
assert torch.allclose(out, torch.sigmoid(torch.relu(x) + b), atol=1e-6)
print("interpreter ok")
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "interpreter ok" in done.stdout, done.stderr[-3000:]


@pytest.mark.gpu
def test_the_layout_candidates_match_the_reference_on_cuda(tmp_path: Path) -> None:
    """On a GPU: 2-D and 3-D convolutions in channels-last under the cuDNN benchmark scope, alone, compiled, and with
    the NHWC / NDHWC epilogue kernels in both GPU backends, against the fp32 reference; the scope leaves every cuDNN
    flag as it was."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    cases = [("layouts/CONV3D_CHAIN", LAYOUT), ("layouts/CONV3D_CHAIN", LAYOUT.with_(compile_mode="default")),
             ("layouts/CONV3D_CHAIN", NDHWC.with_(cudnn_autotune=True)),
             ("layouts/CONV3D_CHAIN", Recipe(channels_last=True, fused=(0,), backend="cuda", cudnn_autotune=True)),
             ("tests/CONV_CHAIN", LAYOUT.with_(compile_mode="max-autotune-no-cudagraphs")),
             ("rewrites/FOLD_CONV_TRANSPOSE", LAYOUT.with_(rewrites=("fold-affine",), compile_mode="default"))]
    for problem, recipe in cases:
        module = candidate(problem, recipe, tmp_path)  # one file per (problem, recipe)
        torch.manual_seed(0)
        ref = module.Model(*module.get_init_inputs()).cuda().eval()
        torch.manual_seed(0)
        new = module.ModelNew(*module.get_init_inputs()).cuda().eval()
        before = cudnn_flags()
        with torch.no_grad():
            for seed in range(3):
                torch.manual_seed(seed)
                inputs = [t.cuda() for t in module.get_inputs()]
                want, got = ref(*inputs), new(*inputs)
                assert cudnn_flags() == before, recipe
                assert torch.allclose(got, want, atol=1e-3, rtol=1e-3), (recipe, (got - want).abs().max())
