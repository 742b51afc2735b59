"""On a GPU the rules team's first attempts from the reference are torch.compile(default) then
torch.compile(max-autotune-no-cudagraphs), before any move of its own (so a finished run is never slower than
torch.compile(default) unless compile fails); and a reference that is one elementwise pass already at >= 90% of the
copy bandwidth ends the run "at the roofline" before any attempt is evaluated. The GPU is faked (a reference result
with roofline figures); the tracing child, the team, the engine loop and the policy are real."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.agents import AT_ROOFLINE, AtRoofline
from search.engine.engine import Engine
from search.engine.loop import run as run_loop
from search.engine.node import Node
from search.engine.policies import AdaptiveEpsilonGreedy, policy_from_dict
from search.engine.tree import Tree
from search.teams.rules import build_team
from search.teams.rules.analysis.facts import Facts, RegionFacts, facts_of
from search.teams.rules.analysis.forward import analyse
from search.teams.rules.planning.moves import GPU_FIRST, candidate_moves, choose
from search.teams.rules.planning.recipe import Recipe, recipe_of
from search.teams.rules.planning.stop import at_roofline, attempt_at_roofline
from tests.teams import rules_problems as P
from tests.teams.test_rules_protocol import WARM, attempt, passed

COMPILE_DEFAULT = Recipe(compile_mode="default")
MAX_AUTOTUNE = Recipe(compile_mode="max-autotune-no-cudagraphs")


def test_on_cuda_the_compile_moves_lead_from_the_reference_and_nowhere_else() -> None:
    facts = facts_of(analyse(P.CONV_CHAIN))
    gpu = candidate_moves(Recipe(), facts, "cuda")
    assert [m.name for m in gpu[:2]] == list(GPU_FIRST) and all(m.leading for m in gpu[:2])
    assert [m.recipe for m in gpu[:2]] == [COMPILE_DEFAULT, MAX_AUTOTUNE]
    # then, the forward being conv-dominated, the layout and cuDNN configuration moves before the fusions
    assert [m.name for m in gpu[2:5]] == ["compile-channels-last", "cudnn-autotune", "fuse-all"]
    assert not any(m.leading for m in gpu[2:])
    cpu = candidate_moves(Recipe(), facts, "cpu")
    assert cpu[0].name == "fuse-all" and not any(m.leading for m in cpu)  # the CPU keeps its order
    fused = Recipe(fused=(0,), backend="triton")
    assert not any(m.leading for m in candidate_moves(fused, facts, "cuda"))  # past the root: by promise


def test_leading_moves_are_taken_in_order_before_any_seeded_choice() -> None:
    gpu = candidate_moves(Recipe(), facts_of(analyse(P.CONV_CHAIN)), "cuda")
    for seed in range(20):
        rng = random.Random(seed)
        assert choose(gpu, set(), rng, first=False).recipe == COMPILE_DEFAULT
        assert choose(gpu, {COMPILE_DEFAULT}, rng, first=False).recipe == MAX_AUTOTUNE
    later = {choose(gpu, {COMPILE_DEFAULT, MAX_AUTOTUNE}, random.Random(s)).name for s in range(40)}
    assert later & {"fuse-all", "cudnn-autotune", "compile-channels-last"} and not later & set(GPU_FIRST)


def tree_with_a_fast_first_child() -> Tree:
    tree = Tree(P.RELU, {"device": "cuda"}, root_source=reference_candidate(P.RELU))
    passed(tree, 0, 2.0)
    tree.add_child(0, "plan+code", status="done", verdict="pass", runtime_ms=1.0)
    return tree


def test_root_first_selects_the_reference_until_it_has_that_many_children() -> None:
    tree = tree_with_a_fast_first_child()
    policy = AdaptiveEpsilonGreedy(root_first=2)
    assert {policy.select(tree, random.Random(s)) for s in range(50)} == {0}
    # the paper's policy mostly goes on from the faster child instead
    assert 1 in {AdaptiveEpsilonGreedy().select(tree, random.Random(s)) for s in range(50)}
    # a reserved (pending) child of the root counts: with two, the root is no longer forced
    assert 1 in {policy.select(tree, random.Random(s), Counter({0: 1})) for s in range(50)}
    assert policy_from_dict(policy.to_dict()) == policy
    assert "root_first" not in AdaptiveEpsilonGreedy().to_dict()  # the paper's policy records as before
    with pytest.raises(ValueError, match="root_first >= 0"):
        AdaptiveEpsilonGreedy(root_first=-1)


def test_the_rules_team_puts_the_reference_first_only_on_a_gpu() -> None:
    assert build_team({"device": "cuda"}).policy.to_dict()["root_first"] == len(GPU_FIRST)
    assert build_team({"device": "cuda:1"}).policy.to_dict()["root_first"] == len(GPU_FIRST)
    assert "root_first" not in build_team({"device": "cpu"}).policy.to_dict()
    assert build_team({"device": "cuda", "policy": "greedy"}).policy.name == "greedy"  # an override is kept


@pytest.mark.slow
def test_on_cuda_the_first_two_attempts_from_the_root_are_both_compile_modes() -> None:
    for seed in (0, 7):
        tree = Tree(P.CONV_CHAIN, {"device": "cuda"}, root_source=reference_candidate(P.CONV_CHAIN))
        passed(tree, 0, 2.0)
        team = build_team({"device": "cuda", "seed": seed, **WARM})
        recipes = [recipe_of(attempt(tree, team, 0, device="cuda")[1]) for _ in range(3)]
        assert recipes[:2] == [COMPILE_DEFAULT, MAX_AUTOTUNE]
        # then the team's own moves (on this conv-dominated forward maybe compile-channels-last, compiled too)
        assert recipes[2] is not None and recipes[2] not in (COMPILE_DEFAULT, MAX_AUTOTUNE)
        assert recipes[2].compile_mode is None or recipes[2].channels_last


# -- at the roofline -----------------------------------------------------------------------------------------------
def gpu(pct: float | None, bound: str = "memory", device: str = "cuda") -> dict[str, Any]:
    return {"device": device, "reference_pct_of_roofline": pct, "reference_bound": bound}


def region(kind: str) -> RegionFacts:
    return RegionFacts(0, "fused0", "relu", kind, (("x", "full", None),))


def test_at_roofline_needs_a_gpu_a_memory_bound_elementwise_reference_and_90_percent() -> None:
    single = Facts([region("single")])
    reason = at_roofline(gpu(93.14), single)
    assert reason is not None and reason.startswith(f"{AT_ROOFLINE} — 93.1% of copy bandwidth; ")
    assert "one elementwise pass (relu)" in reason and "1.07x faster" in reason
    assert at_roofline(gpu(90.0), Facts([region("chain")])) is not None
    assert at_roofline(gpu(95.0), Facts([])) is not None  # copy-like: nothing to fuse
    assert at_roofline(gpu(89.9), single) is None
    assert at_roofline(gpu(None), single) is None
    assert at_roofline(gpu(95.0, bound="compute"), single) is None
    assert at_roofline(gpu(95.0, device="cpu"), single) is None  # the CPU's copy ceiling is too noisy
    assert at_roofline(gpu(95.0), Facts([region("single")], has_conv=True)) is None
    assert at_roofline(gpu(95.0), Facts([region("row")])) is None
    assert at_roofline(gpu(95.0), Facts([region("single"), region("single")])) is None
    assert at_roofline(gpu(95.0), Facts([], error="could not trace")) is None
    assert at_roofline({}, single) is None
    with pytest.raises(ValueError, match="starts with"):
        AtRoofline("search space exhausted")


def fake_gpu_evaluator(pct: float, calls: list[str]) -> Any:
    """The GPU's stand-in: the reference passes at 1 ms with the given roofline figures; an attempt passes slower."""

    def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        calls.append(candidate)
        root = len(calls) == 1
        return {"verdict": "pass", "reasons": [], "timing": {"median_ms": 1.0 if root else 1.2},
                "speedup_vs_eager": 1.0 if root else 0.83,
                "roofline": {"pct_of_peak": pct if root else pct / 1.2, "bound": "memory"},
                "environment": {"device_name": "fake H200", "copy_gbps": 4000.0}}

    return evaluate


@pytest.mark.slow
def test_a_relu_at_95_percent_of_copy_bandwidth_ends_the_run_at_the_roofline() -> None:
    calls: list[str] = []
    tree = Tree(P.RELU, {"device": "cuda", "seed": 0}, root_source=reference_candidate(P.RELU))
    engine = Engine(tree, build_team({"device": "cuda", **WARM}), fake_gpu_evaluator(95.0, calls))
    summary = run_loop(engine, budget=8)
    assert summary.status == "finished"
    assert summary.stop_reason.startswith("at the roofline — 95.0% of copy bandwidth; the reference is one "
                                          "elementwise pass (relu")
    assert len(calls) == 1  # only the reference was evaluated
    attempts = [n for n in tree if n.parent is not None]
    assert [n.verdict for n in attempts] == ["exhausted"] and summary.best is None
    assert tree.meta["stop_reason"] == summary.stop_reason


@pytest.mark.slow
def test_a_relu_below_90_percent_goes_on_with_torch_compile_first() -> None:
    calls: list[str] = []
    tree = Tree(P.RELU, {"device": "cuda", "seed": 0}, root_source=reference_candidate(P.RELU))
    engine = Engine(tree, build_team({"device": "cuda", **WARM}), fake_gpu_evaluator(70.0, calls))
    run_loop(engine, budget=2)
    attempts = [n for n in tree if n.parent is not None]
    assert [recipe_of(n.source) for n in attempts] == [COMPILE_DEFAULT, MAX_AUTOTUNE]
    assert all(n.parent == 0 for n in attempts) and len(calls) == 3


def test_a_move_tried_under_the_other_compile_mode_goes_after_every_new_one() -> None:
    """With a budget of a few attempts, channels-last under compile(default) and again under max-autotune (within
    2.5% of each other on six of the eight conv problems on an H200) mostly wastes one: the
    max-autotune branch tries something new first, and the echo once nothing else is left. The compile modes
    themselves still lead."""
    facts = facts_of(analyse(P.CONV_CHAIN))
    from_ma = candidate_moves(MAX_AUTOTUNE, facts, "cuda")
    first = from_ma[0]
    assert first.name == "channels-last" and first.recipe.compile_mode == MAX_AUTOTUNE.compile_mode
    elsewhere = {COMPILE_DEFAULT, MAX_AUTOTUNE, first.recipe.with_(compile_mode="default")}
    picked = choose(from_ma, {MAX_AUTOTUNE}, random.Random(0), first=True, elsewhere=elsewhere)
    assert picked is not None and picked.name != "channels-last", picked
    assert picked is from_ma[1]  # the next most promising one
    # the echo stays possible, last
    rest = {m.recipe for m in from_ma} - {first.recipe}
    assert choose(from_ma, {MAX_AUTOTUNE, *rest}, random.Random(0), first=True, elsewhere=elsewhere) is first
    # a recipe without compile elsewhere is no echo of a compiled one (eager and compiled time differently)
    plain = {COMPILE_DEFAULT, MAX_AUTOTUNE, first.recipe.with_(compile_mode=None)}
    assert choose(from_ma, {MAX_AUTOTUNE}, random.Random(0), first=True, elsewhere=plain) is first
    # from the reference the two compile modes lead whatever else was tried
    gpu = candidate_moves(Recipe(), facts, "cuda")
    assert choose(gpu, {COMPILE_DEFAULT}, random.Random(0), elsewhere={COMPILE_DEFAULT}).recipe == MAX_AUTOTUNE


@pytest.mark.slow  # the tracing child
def test_parallel_attempts_from_both_compile_modes_play_different_moves() -> None:
    """Through the real plan role (the tracing child included): two attempts planned while both are in flight, one
    from each compile-mode node, choose different moves, not one move under both modes."""
    from search.engine.context import build_window

    tree = Tree(P.CONV_CHAIN, {"device": "cuda"}, root_source=reference_candidate(P.CONV_CHAIN))
    passed(tree, 0, 2.0)
    team = build_team({"seed": 0, "device": "cuda", **WARM})
    device = {"device": "cuda"}
    for recipe, ms in ((COMPILE_DEFAULT, 1.0), (MAX_AUTOTUNE, 1.01)):
        child = tree.add_child(0, "plan+code", status="planning")
        plan = team.plan.plan(build_window(tree, "plan", 0, attempt=child.attempt, device=device))
        child.source = team.code.code(build_window(tree, "code", 0, attempt=child.attempt, device=device), plan).source
        assert recipe_of(child.source) == recipe
        child.status, child.verdict, child.runtime_ms = "done", "pass", ms
    planned = []
    for parent in (1, 2):
        child = tree.add_child(parent, "plan+code", status="planning")  # both in flight: neither is evaluated
        plan = team.plan.plan(build_window(tree, "plan", parent, attempt=child.attempt, device=device))
        planned.append(Recipe.from_text(plan.instructions[0].rsplit("[rules: ", 1)[1].rstrip("]")))
    assert planned[0].compile_mode == "default" and planned[1].compile_mode == "max-autotune-no-cudagraphs"
    assert planned[0].with_(compile_mode=None) != planned[1].with_(compile_mode=None), planned


def at(pct: float | None, node_id: int = 1, flags: tuple[str, ...] = (), verdict: str = "pass",
       parent: int | None = 0) -> Node:
    """A finished attempt with the harness's roofline figure."""
    result = {"flags": list(flags), "roofline": None if pct is None else {"pct_of_peak": pct, "bound": "memory"}}
    return Node(id=node_id, parent=parent, attempt=node_id, role="plan+code", source=f"# {node_id}\n", status="done",
                verdict=verdict, runtime_ms=1.0, result=result)


def test_an_attempt_at_95_to_105_percent_of_its_roofline_with_stable_timing_ends_the_run() -> None:
    cuda = {"device": "cuda"}
    reason = attempt_at_roofline(cuda, [at(None, 0, parent=None), at(80.0, 1), at(99.14, 2), at(96.0, 3)])
    assert reason is not None and reason.startswith(f"{AT_ROOFLINE} — attempt #2 runs at 99.1% of the roofline")
    assert "(memory-bound), so no kernel can be more than 1.01x faster than it" in reason
    assert attempt_at_roofline(cuda, [at(94.9)]) is None
    assert attempt_at_roofline(cuda, [at(171.0)]) is None  # beyond the model: a cache held the bytes, no stop
    assert attempt_at_roofline(cuda, [at(99.0, flags=("timing_unstable",))]) is None
    assert attempt_at_roofline(cuda, [at(99.0, verdict="wrong_output")]) is None
    assert attempt_at_roofline(cuda, [at(99.0, 0, parent=None)]) is None  # the reference has its own rule (90%)
    assert attempt_at_roofline({"device": "cpu"}, [at(99.0)]) is None  # the CPU's ceilings are too noisy
    assert attempt_at_roofline(cuda, []) is None


@pytest.mark.slow  # the tracing child
def test_a_search_stops_once_an_attempt_reaches_its_roofline() -> None:
    """The reference at 30% of its roofline: torch.compile(default) first, which (faked) reaches 97%; the next plan
    ends the run at the roofline instead of spending the rest of the budget of 8."""
    calls: list[str] = []

    def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
        calls.append(candidate)
        root = len(calls) == 1
        return {"verdict": "pass", "reasons": [], "timing": {"median_ms": 1.0 if root else 0.31},
                "speedup_vs_eager": 1.0 if root else 3.2, "flags": [],
                "roofline": {"pct_of_peak": 30.0 if root else 97.0, "bound": "memory"},
                "environment": {"device_name": "fake H200", "copy_gbps": 4000.0}}

    tree = Tree(P.RELU, {"device": "cuda", "seed": 0}, root_source=reference_candidate(P.RELU))
    summary = run_loop(Engine(tree, build_team({"device": "cuda", **WARM}), evaluate), budget=8)
    assert summary.status == "finished" and len(calls) == 2, summary.stop_reason
    assert summary.stop_reason.startswith(f"{AT_ROOFLINE} — attempt #1 runs at 97.0% of the roofline"), summary
    assert recipe_of(tree[1].source) == COMPILE_DEFAULT and summary.best is not None and summary.best.id == 1
