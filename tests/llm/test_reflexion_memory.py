"""Reflexion's memory is plain text (fences stripped, cut on a line boundary), so a reflection full of code never
leaves a half-open fence in a later prompt; a candidate that does not parse is re-asked, naming its line, before
anything is built (it costs no evaluation); the reasoning efforts offered are the installed SDKs'."""

from __future__ import annotations

import re
import typing

import pytest

from search.engine.loop import run as run_loop
from search.llm.settings import REASONING_EFFORTS, THINKING_BUDGET, role_settings
from search.teams.llm.prompts.single import REFLECTION_CHARS, plain_reflection
from tests.llm.kernel_responder import kernel_responder, role_of
from tests.llm.stub_server import RecordedRequest, Reply, StubLLMServer
from tests.llm.teams_support import options, quick_engine

CODE_HEAVY = ("Node {n} failed to build: the kernel's launch was wrong.\nWrite it like this:\n```cpp\n"
              + "__global__ void k(float* x) { x[threadIdx.x] *= 2.0f; }\n" * 60 + "```\nThen time it again.\n"
              + "".join(f"Thought {k}: tile the rows so each block reads its inputs once, then fuse the scale.\n"
                        for k in range(30)) + "```python\ndef cut_off(")


def test_a_reflection_is_kept_as_plain_text_cut_on_a_line_boundary() -> None:
    kept = plain_reflection(CODE_HEAVY.replace("{n}", "3"))
    assert "```" not in kept and "__global__" not in kept and "cut_off" not in kept
    assert kept.startswith("Node 3 failed to build: the kernel's launch was wrong. Write it like this: "
                           "(code left out) Then time it again.")
    assert len(kept) <= REFLECTION_CHARS + 2 and kept.endswith(" …")
    thoughts = re.findall(r"Thought \d+: tile the rows so each block reads its inputs once, then fuse the scale\.",
                          kept)
    assert 5 < len(thoughts) < 30 and kept.count("Thought ") == len(thoughts)  # whole lines, cut between two
    assert plain_reflection("Short and plain.") == "Short and plain."
    assert len(plain_reflection("word " * 1000)) <= REFLECTION_CHARS + 2  # one long line: cut at a word


def test_later_prompts_hold_the_plain_reflections_and_no_open_fence() -> None:
    def responder(request: RecordedRequest) -> Reply:
        found = re.search(r"Task: before your next attempt, reflect on node (\d+)", request.text)
        return Reply(CODE_HEAVY.replace("{n}", found.group(1))) if found else kernel_responder(request)

    with StubLLMServer(responder) as stub:
        run_loop(quick_engine("reflexion", options(stub, "openai"), budget=3))
        writes = [r.text for r in stub.requests if "reflect on node" not in r.text]
    last = writes[-1]
    held = re.findall(r"^- (REFLECTION on node \d+ \(attempt \d+\): .*)$", last, re.MULTILINE)
    assert len(held) == 2 and all("```" not in line and "(code left out)" in line for line in held)
    memory = last.split("## Your reflections on the earlier attempts", 1)[1].split("\n\n", 1)[0]
    assert "```" not in memory and "cut_off" not in memory


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_candidate_that_does_not_parse_is_reasked_before_it_is_built(provider: str) -> None:
    answers = []

    def responder(request: RecordedRequest) -> Reply:
        if role_of(request) == "plan":
            return kernel_responder(request)
        answers.append(request)
        reply = kernel_responder(request)
        if len(answers) == 1:  # the first code answer: a typo in an otherwise good file
            reply = Reply(reply.text.replace("class ModelNew(", "scale = = 2\nclass ModelNew(", 1))
        return reply

    with StubLLMServer(responder) as stub:
        engine = quick_engine("stark", options(stub, provider))
        child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1 and "scale = = 2" not in child.source
    assert "the file does not parse as Python: your line" in answers[1].text
    named = re.search(r"does not parse as Python: your line (\d+): invalid syntax", answers[1].text)
    assert named and f"{int(named.group(1)):5d} | scale = = 2" in answers[1].text  # the line quoted in the re-ask


def test_the_reasoning_efforts_are_the_installed_sdks() -> None:
    from openai.types.shared.reasoning_effort import ReasoningEffort

    sdk = set(typing.get_args(typing.get_args(ReasoningEffort)[0])) - {"none"}
    assert set(REASONING_EFFORTS) == sdk and set(REASONING_EFFORTS) <= set(THINKING_BUDGET)
    settings = role_settings({"provider": "openai", "api_key": "sk-x" * 4, "reasoning_effort": "xhigh",
                              "max_tokens": 1000}, "plan")
    assert settings.answer_limit == 1000 + THINKING_BUDGET["xhigh"]
