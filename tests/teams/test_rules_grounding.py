"""The rules team's skeletons ground its moves: every move, from the reference and from rendered candidates, anchors
only the lines it really changes, and its filled file passes the engine's grounding contract
(search.engine.grounding). Runs on the sample problems of the golden files, traced in-process (tests only)."""

from __future__ import annotations

from functools import cache

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.anchors import parse_anchors, strip_markers
from search.engine.grounding import check_filled, check_skeleton
from search.engine.tree import Tree
from search.teams.rules.analysis.facts import facts_of
from search.teams.rules.planning.anchoring import anchor, fill
from search.teams.rules.planning.moves import candidate_moves
from search.teams.rules.planning.recipe import Recipe
from search.teams.rules.rendering.candidate import render
from tests.teams import rules_problems as P
from tests.teams.samples import analysis, problems


@cache
def rendered(problem: str, cuda: bool, recipe: Recipe) -> str:
    """The recipe's candidate, rendered once (two moves in either order reach the same recipe)."""
    return render(problems()[problem], recipe, analysis(problem, cuda), problem).source


def checked_move(problem: str, cuda: bool, old: str, new_recipe: Recipe) -> tuple[str, str]:
    """The move's anchored skeleton and filled file, both checked against the grounding contract."""
    new = rendered(problem, cuda, new_recipe)
    anchored, instructions = anchor(old, new, "move", new_recipe.to_text(), "move")
    assert len(parse_anchors(anchored)) == len(instructions)
    check_skeleton(anchored, old)
    filled = fill(anchored, old, new)
    check_filled(anchored, filled)
    return anchored, filled


@pytest.mark.slow  # ~15 s each: every sample problem traced and rendered
@pytest.mark.parametrize("cuda", [False, True], ids=["cpu", "cuda"])
def test_every_move_two_deep_of_every_sample_problem_is_grounded(cuda: bool) -> None:
    device = "cuda" if cuda else "cpu"
    checked = 0
    for problem, source in problems().items():
        a = analysis(problem, cuda)
        facts = facts_of(a)
        root = Tree(source, root_source=reference_candidate(source)).root.source
        for move in candidate_moves(Recipe(), facts, device):
            _, first = checked_move(problem, cuda, root, move.recipe)  # from the root
            for second in candidate_moves(move.recipe, facts, device):
                checked_move(problem, cuda, first, second.recipe)
                checked += 1
    assert checked > 200


def test_from_the_root_the_generated_part_replaces_its_model_new_stub_below_the_reference() -> None:
    source = problems()["tests/CONV_CHAIN"]
    root = Tree(source, root_source=reference_candidate(source)).root.source
    anchored, _ = checked_move("tests/CONV_CHAIN", False, root, Recipe(fused=(0,), backend="cpp-omp"))
    (span,) = parse_anchors(anchored)
    stub = span.body.splitlines()
    assert stub[0] == "class ModelNew(Model):" and len(stub) == 2 and span.begin_line > len(source.splitlines())
    assert "below the reference, replace the ModelNew stub with the generated part" in span.instruction
    assert strip_markers(anchored) == root


def test_a_fusion_replaces_exactly_the_forward_lines_of_its_region() -> None:
    problem = "tests/MANY_OPS"
    a = analysis(problem, False)
    one = Recipe(fused=(0,), backend="cpp-omp")
    old = render(P.MANY_OPS, one, a, problem).source
    anchored, filled = checked_move(problem, False, old, one.with_(fused=(0, 1)))
    spans = parse_anchors(anchored)
    header, *kernels, forward = spans  # the kernel's C++ code, its name in load_inline, its Python wrapper
    assert "(part 1/5: record the move in the header)" in header.instruction
    assert header.body.splitlines() == ["# Applied moves: 1 fused kernel(s) in C++/OpenMP.", "# Recipe: fuse=cpp-omp:0"]
    assert len(kernels) == 3 and all("write the kernels here" in k.instruction for k in kernels)
    assert "functions=['fused0_" in kernels[1].body and "apply it in ModelNew" in forward.instruction
    region = a.regions[1]
    traced = forward.body.splitlines()
    assert {ln.strip().split(" = ")[0] for ln in traced} == set(region.nodes)  # one traced line per op of the region
    assert f"{region.nodes[-1]} = {region.name}(" in filled


def test_torch_compile_touches_only_the_model_lines_it_needs() -> None:
    problem = "tests/MANY_OPS"
    fused = Recipe(fused=(0, 1), backend="cpp-omp")
    old = render(P.MANY_OPS, fused, analysis(problem, False), problem).source
    anchored, filled = checked_move(problem, False, old, fused.with_(compile_mode="default"))
    header, model = parse_anchors(anchored)
    assert "header" in header.instruction and "ModelNew" in model.instruction
    assert "def _fused_forward" not in model.body and "kernel" not in model.body.lower()
    assert model.body.strip().splitlines()[-1].strip() == "return self._fused_forward(x, residual)"
    assert 'self._compiled_forward = torch.compile(self._fused_forward, mode="default")' in filled
