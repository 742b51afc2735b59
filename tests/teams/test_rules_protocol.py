"""The rules team through the grounded-instruction protocol: plan anchors, code fills, debug falls back;
all deterministic under a seed. Agents run for real on real trees; nothing here builds a kernel."""

from __future__ import annotations

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.agents import AgentError, MalformedAnswer, PlanAnswer, SearchExhausted
from search.engine.anchors import parse_anchors, resolve_instructions, strip_markers, wrap_all
from search.engine.context import build_window
from search.engine.grounding import check_filled, check_skeleton
from search.engine.tree import Tree
from search.teams import get_team
from search.teams.rules import build_team
from search.teams.rules.analysis.facts import facts_of
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.planning.anchoring import tag_of
from search.teams.rules.planning.moves import WHY, candidate_moves
from search.teams.rules.planning.recipe import Recipe, recipe_of
from search.teams.rules.rendering.candidate import render
from tests.teams import rules_problems as P

# The tracing child forked from a warm zygote (no bubblewrap): the subject is the protocol, not isolation.
WARM = {"sandbox": "none"}


def passed(tree: Tree, node_id: int, runtime: float) -> None:
    node = tree[node_id]
    node.status, node.verdict, node.runtime_ms = "done", "pass", runtime


def attempt(tree: Tree, team, parent: int, device: str = "cpu") -> tuple[PlanAnswer, str]:  # noqa: ANN001
    """One plan+code step from parent, added to the tree as a passing child; returns the plan and source."""
    child = tree.add_child(parent, "plan+code", status="planning")
    plan = team.plan.plan(build_window(tree, "plan", parent, attempt=child.attempt, device={"device": device}))
    code = team.code.code(build_window(tree, "code", parent, attempt=child.attempt, device={"device": device}), plan)
    check_skeleton(plan.anchored_source, tree[parent].source, parent)  # the engine's grounding contract, both halves
    check_filled(plan.anchored_source, code.source)
    child.source, child.anchored_source = code.source, plan.anchored_source
    passed(tree, child.id, 1.0)
    return plan, code.source


def new_tree(problem: str) -> Tree:
    tree = Tree(problem, {"device": "cpu"}, root_source=reference_candidate(problem))
    passed(tree, 0, 2.0)
    return tree


@pytest.mark.slow
def test_it_plans_with_anchors_and_fills_every_span() -> None:
    tree = new_tree(P.CONV_CHAIN)
    team = get_team("rules", {"seed": 0, **WARM})
    plan, source = attempt(tree, team, 0)
    anchors = resolve_instructions(plan.anchored_source, plan.instructions)
    # From the reference itself the whole generated part is new: one span, the root's ModelNew stub below the
    # untouched reference.
    assert len(anchors) == len(plan.instructions) == 1
    assert anchors[0].body.splitlines()[0] == "class ModelNew(Model):" and len(anchors[0].body.splitlines()) <= 2
    assert strip_markers(plan.anchored_source) == tree.root.source
    tags = {tag_of(a.instruction) for a in anchors}
    assert len(tags) == 1
    recipe = Recipe.from_text(tags.pop() or "")
    assert recipe_of(source) == recipe and not recipe.empty
    assert source == render(P.CONV_CHAIN, recipe, analyse(P.CONV_CHAIN)).source
    compile(source, "candidate.py", "exec")
    assert "class ModelNew(Model):" in source


@pytest.mark.slow
def test_moves_compose_and_siblings_differ() -> None:
    tree = new_tree(P.MANY_OPS)
    team = build_team({"seed": 3, **WARM})
    recipes = [recipe_of(attempt(tree, team, 0)[1]) for _ in range(4)]
    assert len(set(recipes)) == 4  # each sibling tries a move the others did not
    fused = next(k for k, r in enumerate(recipes, start=1) if r and r.fused and r.compile_mode is None)
    plan, source = attempt(tree, team, fused)
    child, parent = recipe_of(source), recipes[fused - 1]
    assert child is not None and parent is not None
    assert set(parent.fused) <= set(child.fused) and child != parent  # builds on the parent's kernels
    # Only the changed lines are anchored: the parent's unchanged kernel code stays outside the spans.
    assert sum(len(a.body.splitlines()) for a in parse_anchors(plan.anchored_source)) < len(source.splitlines()) / 2


@pytest.mark.slow
def test_siblings_planned_while_others_are_in_flight_differ() -> None:
    """Parallel attempts: the plan of the second child comes before the first is evaluated (so before it enters
    any window); it must still choose another move."""
    tree = new_tree(P.MANY_OPS)
    team = build_team({"seed": 0, **WARM})
    tags = []
    for _ in range(3):
        child = tree.add_child(0, "plan+code", status="planning")  # in flight: not in the window
        plan = team.plan.plan(build_window(tree, "plan", 0, attempt=child.attempt, device={"device": "cpu"}))
        tags.append(tag_of(plan.instructions[0]))
    assert len(set(tags)) == 3, tags


@pytest.mark.slow
def test_it_is_deterministic_under_a_seed() -> None:
    def run(seed: int) -> list[str]:
        tree = new_tree(P.MANY_OPS)
        team = build_team({"seed": seed, **WARM})
        return [attempt(tree, team, 0)[0].anchored_source for _ in range(3)]

    assert run(7) == run(7)


@pytest.mark.slow
def test_it_says_when_nothing_is_left_to_try() -> None:
    tree = new_tree(P.MATMUL)
    team = build_team(WARM)
    seen = {recipe_of(attempt(tree, team, 0)[1]) for _ in range(2)}
    assert seen == {Recipe(compile_mode="default"), Recipe(compile_mode="max-autotune-no-cudagraphs")}
    with pytest.raises(AgentError) as err:
        team.plan.plan(build_window(tree, "plan", 0, attempt=3, device={"device": "cpu"}))
    assert not err.value.permanent and isinstance(err.value, SearchExhausted)  # the root and both children: no move
    assert "nothing left to try" in err.value.message and "no chain" in err.value.message


@pytest.mark.slow
def test_an_exhausted_branch_is_not_an_exhausted_space() -> None:
    """Nothing is left from node 1 (torch.compile'd matmul), but the root still has an untried move: only that
    branch ends (a plain agent error the policy prunes); the run goes on."""
    tree = new_tree(P.MATMUL)
    team = build_team(WARM)
    attempt(tree, team, 0)
    with pytest.raises(AgentError) as err:
        team.plan.plan(build_window(tree, "plan", 1, attempt=2, device={"device": "cpu"}))
    assert not isinstance(err.value, SearchExhausted) and not err.value.permanent
    assert "nothing left to try from node 1" in err.value.message
    assert "node(s) 0 still have untried moves" in err.value.message


def test_the_code_role_refuses_a_plan_it_did_not_write() -> None:
    tree = new_tree(P.CONV_CHAIN)
    team = build_team(WARM)
    plan = PlanAnswer(wrap_all(tree.root.source, "make it faster"), ["make it faster"])
    with pytest.raises(MalformedAnswer):
        team.code.code(build_window(tree, "code", 0, device={"device": "cpu"}), plan)


def failed_child(tree: Tree, recipe: Recipe, build_log: str, parent: int = 0) -> int:
    source = render(tree.problem_source, recipe, analyse(tree.problem_source)).source
    child = tree.add_child(parent, "plan+code", source=source, status="failed", verdict="build_error",
                           reasons=["the candidate failed to build"],
                           result={"verdict": "build_error", "logs": {"build": build_log, "run": ""}})
    return child.id


def debug(tree: Tree, node_id: int) -> Recipe | None:
    team = build_team(WARM)
    answer = team.debug.debug(build_window(tree, "debug", node_id, device={"device": "cpu"}))
    assert "fix:" in answer.text
    return recipe_of(answer.source)


@pytest.mark.slow
def test_debug_drops_the_kernel_the_diagnostics_name() -> None:
    tree = new_tree(P.MANY_OPS)
    names = [r.name for r in analyse(P.MANY_OPS).regions]
    node = failed_child(tree, Recipe(fused=(0, 1, 2), backend="cpp-omp"), f"error: in {names[1]}: bad thing")
    assert debug(tree, node) == Recipe(fused=(0, 2), backend="cpp-omp")


@pytest.mark.slow
def test_debug_falls_back_to_a_safer_variant_then_further() -> None:
    tree = new_tree(P.MANY_OPS)
    node = failed_child(tree, Recipe(fused=(0, 1), backend="cpp-omp", compile_mode="default"), "g++: error")
    assert debug(tree, node) == Recipe(fused=(0, 1), backend="cpp-serial", compile_mode="default")
    # A sibling already tried the serial variant: the next fix removes torch.compile instead.
    failed_child(tree, Recipe(fused=(0, 1), backend="cpp-serial", compile_mode="default"), "still broken")
    assert debug(tree, node) == Recipe(fused=(0, 1), backend="cpp-omp")


@pytest.mark.slow
def test_on_cuda_it_offers_gpu_moves_and_writes_triton_by_default() -> None:
    tree = Tree(P.CONV_CHAIN, {"device": "cuda"}, root_source=reference_candidate(P.CONV_CHAIN))
    passed(tree, 0, 2.0)
    team = build_team(WARM)
    recipes = []
    for _ in range(5):  # 2 compile modes first, then (seeded) channels-last, fold-affine, fuse all (no CUDA graph)
        plan, source = attempt(tree, team, 0, device="cuda")
        recipes.append(recipe_of(source))
        compile(source, "candidate.py", "exec")
    assert len(set(recipes)) == 5
    assert [r.compile_mode for r in recipes[:2]] == ["default", "max-autotune-no-cudagraphs"]
    assert any(r.fused and r.backend == "triton" for r in recipes if r)
    assert not any(r.cuda_graph for r in recipes if r) and any(r.channels_last for r in recipes if r)
    assert any(r.compile_mode == "max-autotune-no-cudagraphs" for r in recipes if r)
    # A launch-bound forward: after the two compile modes, the CUDA graph moves are the most promising
    # (fuse -> graph weighs most in the siblings' seeded choice).
    tree = Tree(P.LAUNCH_BOUND, {"device": "cuda"}, root_source=reference_candidate(P.LAUNCH_BOUND))
    passed(tree, 0, 2.0)
    tried = []
    for _ in range(5):
        plan, source = attempt(tree, team, 0, device="cuda")
        tried.append(recipe_of(source))
    assert [r.compile_mode for r in tried[:2]] == ["default", "max-autotune-no-cudagraphs"]
    assert Recipe(fused=(0, 1, 2, 3), backend="triton", cuda_graph=True) in tried
    compile(source, "candidate.py", "exec")


@pytest.mark.slow
def test_debug_blames_the_last_move_and_ends_the_branch_when_only_undoing_it_is_left() -> None:
    tree = new_tree(P.MANY_OPS)
    team = build_team(WARM)
    fused = Recipe(fused=(0, 1, 2), backend="cpp-omp")
    parent = failed_child(tree, fused, "")
    tree[parent].status, tree[parent].verdict = "done", "pass"
    parent_source = tree[parent].source
    # torch.compile on top of the fused kernels was rejected: soften it (max-autotune -> default) first ...
    node = failed_child(tree, fused.with_(compile_mode="max-autotune-no-cudagraphs"), "", parent=parent)
    tree[node].verdict, tree[node].reasons = "rejected", ["harness_patched: the candidate replaced Module.__init__"]
    tree[node].anchored_source = wrap_all(parent_source, "wrap in torch.compile")
    assert debug(tree, node) == fused.with_(compile_mode="default")
    # ... and with plain torch.compile, undoing it is all that is left: the parent, already measured.
    node = failed_child(tree, fused.with_(compile_mode="default"), "", parent=parent)
    tree[node].verdict = "rejected"
    tree[node].anchored_source = wrap_all(parent_source, "wrap in torch.compile")
    with pytest.raises(AgentError, match="no untried fix"):
        team.debug.debug(build_window(tree, "debug", node, device={"device": "cpu"}))


@pytest.mark.slow
def test_on_a_bare_softmax_the_first_move_writes_a_row_kernel_of_its_own() -> None:
    tree = new_tree(P.SOFTMAX)
    plan, source = attempt(tree, build_team(WARM), 0)
    assert recipe_of(source) == Recipe(fused=(0,), backend="cpp-omp")
    assert len(parse_anchors(plan.anchored_source)) == len(plan.instructions) == 1  # below the reference
    first = plan.instructions[0]
    assert first.startswith("Fuse the traced forward into C++/OpenMP kernels") and "softmax(dim=-1) on x (full)" in first
    assert "row-wise op" in first and "one read of the input and one write of the output" in first
    assert "torch::Tensor fused0_softmax(torch::Tensor x)" in source
    assert "softmax = fused0_softmax(x)" in source and "torch.softmax(x" not in source.split("class ModelNew")[1]


def test_every_kind_of_fusion_has_its_own_move_and_reason() -> None:
    moves = {m.name: m for m in candidate_moves(Recipe(), facts_of(analyse(P.ROW_OPS)), "cpu")}
    everything = moves["fuse-all"].instruction
    for reason in WHY.values():
        if reason != WHY["chain"]:  # ROW_OPS has no chain of two elementwise ops
            assert reason in everything
    assert moves["fuse-2"].instruction.startswith("Fuse one row-wise op into a C++/OpenMP kernel (add -> layer_norm")
    assert moves["fuse-8"].instruction.startswith("Fuse one reduction into a C++/OpenMP kernel (sum(dim=1, keepdim)")
    assert moves["fuse-11"].instruction.startswith("Fuse one elementwise op into a C++/OpenMP kernel (relu")
    gpu = {m.name: m for m in candidate_moves(Recipe(), facts_of(analyse(P.ROW_OPS)), "cuda")}
    assert gpu["fuse-all"].recipe.backend == "triton" and "Triton kernels" in gpu["fuse-all"].instruction


@pytest.mark.slow
def test_debug_drops_a_failing_row_kernel_and_pytorch_runs_the_op_again() -> None:
    tree = new_tree(P.ROW_OPS)
    regions = analyse(P.ROW_OPS).regions
    everything = tuple(r.index for r in regions)
    node = failed_child(tree, Recipe(fused=everything, backend="cpp-omp"),
                        f"error: in function {regions[2].name}: bad thing")
    fixed = debug(tree, node)
    assert fixed == Recipe(fused=tuple(i for i in everything if i != 2), backend="cpp-omp")
    fallback = render(P.ROW_OPS, fixed, analyse(P.ROW_OPS)).source.split("def _fused_forward")[1]
    assert "ln = self.ln(add)" in fallback and "add = x + residual" in fallback
    assert regions[2].name not in fallback and regions[0].name in fallback
    # A lone row op named by the error: dropping it gives back the reference, so the safer variant comes first.
    tree = new_tree(P.LAYERNORM)
    node = failed_child(tree, Recipe(fused=(0,), backend="cpp-omp"), "error: fused0_layer_norm: bad thing")
    assert debug(tree, node) == Recipe(fused=(0,), backend="cpp-serial")
