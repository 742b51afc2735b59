"""Prompts: what each role is told, and how its answer is checked (anchors, fences, markers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from search.engine.agents import MalformedAnswer, PlanAnswer
from search.engine.anchors import BEGIN, END, AnchorError
from search.engine.context import build_window
from search.engine.grounding import check_filled
from search.engine.tree import Tree
from search.teams.llm.prompts import VERSIONS, code, debug, plan, single
from search.teams.llm.prompts.common import candidate_block, target_of

PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()
SOURCE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 2.0\n"
ANCHORED = ("import torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
            f"        # {BEGIN}\n        return torch.relu(x) * 2.0\n        # {END}\n")


SUMMARY = {"inputs": [{"shape": [16, 256], "dtype": "float32"}], "outputs": [{"shape": [16, 256], "dtype": "float32"}],
           "init_inputs": [], "parameters": 0, "flops": 8192.0, "bytes": 32768, "forward_ms": 0.05,
           "device": "cpu", "ops": ["mul", "relu"]}


def tree_with_attempts() -> Tree:
    tree = Tree(PROBLEM, {"target": "cuda"}, root_source=SOURCE)
    tree.root.status, tree.root.verdict, tree.root.runtime_ms = "done", "pass", 2.0
    good = tree.add_child(0, "plan+code", source=SOURCE.replace("* 2.0", "+ x"), status="done", verdict="pass",
                          runtime_ms=1.0, instruction="fuse the scale")
    tree.add_child(0, "plan+code", source=SOURCE.replace("relu", "relu_"), status="done", verdict="build_error",
                   reasons=["nvcc: error: expected a ';'"], result={"logs": {"build": "kernel.cu(3): error: expected a ';'"}})
    assert good.correct
    return tree


def window(role: str, target: int = 0, **kw: object):
    return build_window(tree_with_attempts(), role, target, problem=SUMMARY,
                        device={"name": "NVIDIA H200", "sms": 132, "bandwidth_gbps": 4800}, **kw)


def test_the_plan_prompt_holds_task_target_device_problem_and_format() -> None:
    w = window("plan")
    system = plan.system(w, target_of(w))
    for needle in ("PLAN agent", "Target: CUDA", "load_inline", "NVIDIA H200", "sms = 132",
                   "Inputs: float32[16, 256]", "8.19 kFLOP, 32.8 kB moved", "intensity 0.25 FLOP/byte",
                   "Operators in the reference: mul, relu",
                   "INSTRUCTION 1:", BEGIN, END, "def get_inputs", "atol=0.01, rtol=0.01"):
        assert needle in system, needle
    user = plan.user_prompt(w, 10_000)
    assert "the node you work on (i)" in user and "runtime 1 ms" in user  # the leaderboard entry
    assert "the answer format" in user and "rejected" not in user


def test_the_system_prompt_is_stable_across_calls_so_it_can_be_cached() -> None:
    first, second = window("plan", 0), window("plan", 1)
    assert plan.system(first, "cuda") == plan.system(second, "cuda")
    assert plan.user_prompt(first, None) != plan.user_prompt(second, None)


def test_the_debug_prompt_shows_the_failure() -> None:
    w = window("debug", 2)
    user = debug.user_prompt(w, None)
    assert "verdict build_error" in user and "expected a ';'" in user
    assert "DEBUG agent" in debug.system(w, "cuda") and "MINIMAL" in debug.system(w, "cuda")


def test_a_reask_names_what_was_wrong() -> None:
    user = plan.user_prompt(window("plan"), None, previous_error="no span is marked")
    assert "previous answer for this node was rejected: no span is marked" in user


def test_a_reask_from_the_engine_states_its_reason_once() -> None:
    """The engine's feedback is listed by the window (its section "Your previous answer was rejected"); the re-ask
    note does not repeat it."""
    w = window("plan")
    w.feedback = ["no span is marked; wrap at least one span"]
    user = plan.user_prompt(w, None, previous_error=w.feedback[-1])
    assert user.count("no span is marked; wrap at least one span") == 1
    assert "## Your previous answer was rejected" in user and "rejected for the reason given above" in user


@pytest.mark.parametrize("name,expected", [("cpp", "Target: CPU"), ("cpu", "Target: CPU"),
                                           ("triton", "Target: Triton"), ("torch", "Target: PyTorch level")])
def test_each_target_gets_its_guidance(name: str, expected: str) -> None:
    w = window("plan")
    w.settings["target"] = name
    assert expected in plan.system(w, target_of(w))


def test_versions_are_named() -> None:
    assert VERSIONS == {"plan": "plan/5", "code": "code/4", "debug": "debug/3", "single": "single/4"}


def plan_text(body: str = ANCHORED, lines: str = "INSTRUCTION 1: fuse relu and scale into one kernel") -> str:
    return f"Reasoning.\n{lines}\n```python\n{body}```\n"


def test_a_good_plan_parses() -> None:
    answer = plan.parse(plan_text())
    assert answer.anchored_source == ANCHORED
    assert answer.instructions == ["fuse relu and scale into one kernel"]


def test_instructions_may_sit_on_the_markers() -> None:
    body = ANCHORED.replace(f"# {BEGIN}", f"# {BEGIN} write a fused CUDA kernel")
    assert plan.parse(plan_text(body, "")).instructions == ["write a fused CUDA kernel"]


def test_numbered_instructions_are_ordered_and_markdown_tolerated() -> None:
    body = ANCHORED + f"    # {BEGIN}\n    # {END}\n"
    answer = plan.parse(plan_text(body, "**INSTRUCTION 2:** add a launcher\n**INSTRUCTION 1:** fuse"))
    assert answer.instructions == ["fuse", "add a launcher"]


@pytest.mark.parametrize("text,words", [
    ("I would fuse the kernels.", "no fenced code block"),
    ("INSTRUCTION 1: x\n```python\nimport torch\nclass ModelNew:\n", "cut off"),
    ("INSTRUCTION 1: x\n```python\ndef helper():\n    pass\n```", "class ModelNew"),
    (plan_text(SOURCE), "no span is marked"),
    (plan_text(ANCHORED.replace(f"        # {END}\n", "")), "never closed"),
    (plan_text(lines="INSTRUCTION 1: a\nINSTRUCTION 2: b"), "1 span(s) but 2 instruction(s)"),
    (plan_text(lines=""), "no instruction"),
])
def test_a_malformed_plan_is_rejected_with_the_reason(text: str, words: str) -> None:
    with pytest.raises(MalformedAnswer) as info:
        plan.parse(text)
    assert words in info.value.message
    assert info.value.text == text


def test_code_answers_are_the_file_in_the_block_which_the_engine_checks_against_the_skeleton() -> None:
    p = PlanAnswer(ANCHORED, ["fuse"])
    filled = SOURCE.replace("return torch.relu(x) * 2.0", "return fused(x)")
    assert code.parse(f"```python\n{filled}```", p).source == filled
    check_filled(ANCHORED, filled)  # what Engine.expand checks (search.engine.grounding)
    with pytest.raises(AnchorError, match="markers"):
        check_filled(ANCHORED, code.parse(f"```python\n{ANCHORED}```", p).source)
    with pytest.raises(AnchorError, match="unchanged"):
        check_filled(ANCHORED, code.parse(f"```python\n{SOURCE}```", p).source)


def test_debug_and_single_answers_must_change_the_file() -> None:
    w = window("debug", 2)
    with pytest.raises(MalformedAnswer, match="identical"):
        debug.parse(f"```python\n{w.target.source}```", w)
    fixed = w.target.source.replace("relu_", "relu")
    assert debug.parse(f"The bug: in-place op.\n```python\n{fixed}```", w).source == fixed
    assert single.parse(f"```python\n{fixed}```", w).source == fixed


def test_the_block_defining_modelnew_wins_over_snippets() -> None:
    text = f"Change this:\n```python\nx = 1\n```\nFull file:\n```python\n{SOURCE}```\n"
    assert candidate_block(text) == SOURCE
