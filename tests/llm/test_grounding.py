"""The grounding contract through the real engine, the real SDKs and the stub vendor server, on both providers: a
skeleton or a filled file that breaks it is re-asked with the line named; the allowance is accepted and recorded."""

from __future__ import annotations

import re

import pytest

from search.engine.anchors import BEGIN
from tests.llm.kernel_responder import BLOCK_RE, first_answer, plan_answer
from tests.llm.stub_server import RecordedRequest, Reply, StubLLMServer
from tests.llm.teams_support import engine_for, options

PROVIDERS = ["anthropic", "openai-compatible"]
GET_INPUTS = "    return [torch.randn(16, 256)]"
INSTRUCTION = "rewrite the body of forward as a single fused pass over the input"


def rejection(request: RecordedRequest) -> str:
    """The latest reason in the window's feedback section (the re-ask note does not repeat it)."""
    found = re.search(r"## Your previous answer was rejected\n((?:- .*\n?)+)", request.text)
    assert found, "the re-ask does not carry the reason"
    return found.group(1).rstrip("\n").split("\n- ")[-1].removeprefix("- ")


def line_of(text: str, line: str) -> int:
    return text.splitlines().index(line) + 1


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_skeleton_that_edits_outside_its_spans_is_reasked_naming_the_line(stub: StubLLMServer, results: dict,
                                                                           provider: str) -> None:
    engine = engine_for("stark", options(stub, provider), results, [])
    bad = plan_answer(engine.tree.root.source).replace(GET_INPUTS, "    return [torch.randn(16, 256) + 1]")
    stub.push(Reply(bad))
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1
    skeleton = BLOCK_RE.search(bad).group(1)  # type: ignore[union-attr]
    at = line_of(skeleton, "    return [torch.randn(16, 256) + 1]")
    reason = rejection(stub.requests[1])
    assert f"skeleton line {at} 'return [torch.randn(16, 256) + 1]' is line {at - 2} " \
           "'return [torch.randn(16, 256)]' in node 0's source" in reason
    assert "Copy node 0's source exactly" in reason and "the PLAN agent" in stub.requests[1].text
    assert [c["role"] for c in child.usage["calls"]] == ["plan", "plan", "code"]
    assert GET_INPUTS in child.anchored_source  # the accepted skeleton is node 0's source


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_fill_that_edits_outside_the_spans_is_reasked_naming_the_line(stub: StubLLMServer, results: dict,
                                                                       provider: str) -> None:
    stub.responder = first_answer("code", lambda src: src.replace(GET_INPUTS, "    return [torch.randn(16, 256) * 0]"))
    engine = engine_for("stark", options(stub, provider), results, [])
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1
    at = line_of(child.anchored_source, GET_INPUTS)
    reason = rejection(stub.requests[2])
    assert f"skeleton line {at} 'return [torch.randn(16, 256)]' is outside every span but your file changes it to " \
           "'return [torch.randn(16, 256) * 0]'" in reason
    assert "the CODE agent" in stub.requests[2].text and "malformed answer" in child.agent_log
    assert GET_INPUTS in child.source and [c["role"] for c in child.usage["calls"]] == ["plan", "code", "code"]


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_fill_that_leaves_a_span_unchanged_is_reasked_naming_the_span(stub: StubLLMServer, results: dict,
                                                                       provider: str) -> None:
    stub.responder = first_answer("code", lambda src: src.replace("        # fused pass (stub code agent)\n", ""))
    engine = engine_for("stark", options(stub, provider), results, [])
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1
    begin = next(k for k, ln in enumerate(child.anchored_source.splitlines(), start=1) if BEGIN in ln)
    assert f"span 1 (skeleton line {begin}: {INSTRUCTION}) is unchanged in your file" in rejection(stub.requests[2])


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_new_import_and_helper_outside_the_spans_are_allowed_and_recorded(stub: StubLLMServer, results: dict,
                                                                           provider: str) -> None:
    helper = "\n\ndef _twice(t):\n    return t * 2.0\n"
    stub.responder = first_answer("code", lambda src: src.replace("import torch.nn as nn\n", "import torch.nn as nn\n"
                                                               "import math\n" + helper))
    engine = engine_for("stark", options(stub, provider), results, [])
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 0
    assert "import math" in child.source and "def _twice(t):" in child.source
    math_at = line_of(child.source, "import math")
    assert (f"allowed outside the spans: lines {math_at}-{math_at + 4}: new import + function (math, _twice)"
            in child.agent_log)
