"""Grounding leaks. On examples/problems/level1/relu.py, with a span holding the whole `forward`, a
code fill that added `self._stub_edit = 1` after `super().__init__()` (a skeleton line above the blank line before
the span) passed as part of the span's fill, and the node log said "allowed outside the spans: nothing". It is now
a line outside the spans, inside `class Model`: re-asked with the line named, on both providers."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.anchors import BEGIN, END
from search.engine.grounding import align
from search.engine.tree import Tree
from tests.llm.kernel_responder import role_of
from tests.llm.stub_server import RecordedRequest, Reply, StubLLMServer
from tests.llm.teams_support import options, quick_engine

RELU = (Path(__file__).resolve().parents[2] / "examples" / "problems" / "level1" / "relu.py").read_text()
ROOT = Tree(RELU, root_source=reference_candidate(RELU)).root.source  # the problem and `class ModelNew(Model)`: node 0's source
FORWARD = "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n        return torch.relu(x)\n"
SKELETON = ROOT.replace(FORWARD, f"    # {BEGIN} write forward as one fused kernel\n{FORWARD}    # {END}\n")
FILLED = ROOT.replace("        return torch.relu(x)\n", "        return torch.clamp_min(x, 0.0)\n")
LEAK = FILLED.replace("        super().__init__()\n", "        super().__init__()\n        self._stub_edit = 1\n")


def test_the_added_line_is_outside_the_span() -> None:
    assert "\n\n    # <<<IMPROVE BEGINS>>>" in SKELETON  # the blank line between super().__init__() and the span
    leak = align(SKELETON, LEAK)
    assert len(leak.violations) == 1 and "'self._stub_edit = 1' is new and outside every span" in leak.violations[0]
    assert "inside the top-level statement that skeleton line" in leak.violations[0]
    clean = align(SKELETON, FILLED)
    assert clean.violations == [] and "allowed outside the spans: nothing" in clean.summary()
    # A fill that drops the blank line before its span is still the span's fill (not attached to the line above).
    tight = FILLED.replace("        super().__init__()\n\n", "        super().__init__()\n")
    assert align(SKELETON, tight).violations == []


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_leak_is_reasked_naming_the_line(provider: str) -> None:
    codes = []

    def responder(request: RecordedRequest) -> Reply:
        if role_of(request) == "plan":
            return Reply(f"INSTRUCTION 1: write forward as one fused kernel\n```python\n{SKELETON}```\n")
        codes.append(request)
        return Reply(f"Done.\n```python\n{LEAK if len(codes) == 1 else FILLED}```\n")

    with StubLLMServer(responder) as stub:
        engine = quick_engine("stark", options(stub, provider), problem=RELU)
        child = engine.expand(0)
        assert child.status == "building" and child.reasks == 1 and "_stub_edit" not in child.source
        assert "'self._stub_edit = 1' is new and outside every span" in codes[1].text
        assert "allowed outside the spans: nothing" in child.agent_log


# Additions that look like new definitions but patch, shadow or run code at import (search.engine.effects): each is
# re-asked, naming its line and what it does, on either provider; the second answer (the clean fill) is kept.
LEAKS = [
    ("def _new_init(self):\n    nn.Module.__init__(self)\n\n\n_patch = setattr(Model, '__init__', _new_init)\n",
     "calls setattr(...) on the right of the assignment"),
    ("def super():\n    return object\n", "shadows the builtin 'super', which the skeleton's fixed lines use"),
    ("class Helper:\n    setattr(Model, 'forward', lambda self, x: x)\n", "runs in the body of class 'Helper'"),
    ("@print\ndef relu_fast(x):\n    return x\n", "decorates 'relu_fast' with @print"),
    ("def relu_fast(x, _p=setattr(Model, 'forward', None)):\n    return x\n", "calls setattr(...) in a default"),
    ("_ = exec('Model.forward = lambda self, x: x')\n", "calls exec(...) on the right of the assignment"),
]


@pytest.mark.parametrize("leak, why", LEAKS, ids=["setattr", "super", "class-body", "decorator", "default", "exec"])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_added_statement_that_patches_or_runs_code_is_reasked(provider: str, leak: str, why: str) -> None:
    codes = []
    leaked = FILLED.replace("\n\nbatch_size = 64", f"\n\n{leak}\n\nbatch_size = 64")

    def responder(request: RecordedRequest) -> Reply:
        if role_of(request) == "plan":
            return Reply(f"INSTRUCTION 1: write forward as one fused kernel\n```python\n{SKELETON}```\n")
        codes.append(request)
        return Reply(f"Done.\n```python\n{leaked if len(codes) == 1 else FILLED}```\n")

    with StubLLMServer(responder) as stub:
        engine = quick_engine("stark", options(stub, provider), problem=RELU)
        child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1 and child.source.strip() == FILLED.strip()
    first = leak.splitlines()[0]
    number = next(no for no, text in enumerate(leaked.splitlines(), start=1) if text == first)
    where = f"your lines {number}-" if len(leak.strip().splitlines()) > 1 else f"your line {number} "
    assert why in codes[1].text and where in codes[1].text
    assert "allowed outside the spans: nothing" in child.agent_log
