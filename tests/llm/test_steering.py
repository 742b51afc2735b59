"""Human steering through the real SDKs against the stand-in server, on both providers: an edited
instruction reaches the code agent verbatim, a rejected plan spends no budget, hints reach only the subtree they
were given for (or every plan, run-wide), a pruned branch is never selected, a pinned node goes next, and "try
this" becomes an attempt whose anchored source is the user's skeleton."""

from __future__ import annotations

import pytest

from search.engine.events import Event
from search.engine.steering import SteeringError
from tests.llm.kernel_responder import plan_answer
from tests.llm.stub_server import StubLLMServer
from tests.llm.teams_support import options, quick_engine

PROVIDERS = ("anthropic", "openai")


def skeleton(source: str) -> str:
    """The stand-in plan agent's skeleton of `source` (the body of forward in one span)."""
    text = plan_answer(source)
    return text.split("```python\n", 1)[1].rsplit("\n```", 1)[0] + "\n"


def code_prompts(stub: StubLLMServer) -> list[str]:
    return [r.text for r in stub.requests if "the CODE agent" in r.text]


def plan_prompts(stub: StubLLMServer) -> list[str]:
    return [r.text for r in stub.requests if "the PLAN agent" in r.text]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_review_edit_reaches_the_code_agent_and_reject_is_free(stub: StubLLMServer, provider: str) -> None:
    events: list[Event] = []
    engine = quick_engine("stark", options(stub, provider), events, budget=3)
    engine.tree.settings["review_timeout_s"] = 600
    child = engine.expand(0)
    assert child.status == "review" and child.anchored_source and not code_prompts(stub)
    assert child.human[-1]["action"] == "review"
    with pytest.raises(SteeringError) as bad:
        engine.steer("ada", "edit", child.id, instructions=["a", "b"])
    assert bad.value.field == "instructions" and "1 span(s) but 2 instruction(s)" in bad.value.message
    edited = "tile the loop by 128 and keep the ReLU in registers (ada's words, verbatim)"
    engine.steer("ada", "edit", child.id, instructions=[edited])
    assert child.status == "selected" and child.instructions == [edited]
    engine.expand(0, child.id)
    assert child.status == "building" and len(plan_prompts(stub)) == 1  # not planned again
    assert f"INSTRUCTION 1: {edited}" in code_prompts(stub)[-1]
    assert [e["action"] for e in child.human] == ["review", "edit"]
    assert any(e.type == "node.human" and e.data["action"] == "edit" for e in events)

    spent = engine.tree.attempts
    second = engine.expand(0)
    assert second.status == "review" and engine.tree.attempts == spent + 1
    engine.steer("ada", "reject", second.id)
    assert second.verdict == "plan_rejected" and engine.tree.attempts == spent  # the attempt is not spent


@pytest.mark.parametrize("provider", PROVIDERS)
def test_hints_reach_only_their_subtree_and_run_wide_every_plan(stub: StubLLMServer, provider: str) -> None:
    engine = quick_engine("stark", options(stub, provider), budget=6)
    a = engine.expand(0)
    engine.record(a.id, {"verdict": "pass", "reasons": [], "timing": {"median_ms": 0.9}})
    b = engine.expand(0)
    engine.record(b.id, {"verdict": "pass", "reasons": [], "timing": {"median_ms": 0.95}})
    engine.steer("ada", "hint", a.id, text="use shared-memory tiling for the reduction")
    engine.expand(a.id)
    assert "use shared-memory tiling for the reduction" in plan_prompts(stub)[-1]
    assert "Notes from the user" in plan_prompts(stub)[-1]
    engine.expand(b.id)  # not in a's subtree
    assert "shared-memory tiling" not in plan_prompts(stub)[-1]
    engine.steer("ada", "hint", None, text="never use atomics")
    engine.expand(b.id)
    assert "never use atomics" in plan_prompts(stub)[-1] and "shared-memory" not in plan_prompts(stub)[-1]
    assert engine.tree.meta["human"][-1]["detail"]["text"] == "never use atomics"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_pin_prune_and_try_this(stub: StubLLMServer, provider: str) -> None:
    engine = quick_engine("stark", options(stub, provider), budget=20)
    kids = []
    for ms in (0.5, 0.9, 0.8):
        kid = engine.expand(0)
        engine.record(kid.id, {"verdict": "pass", "reasons": [], "timing": {"median_ms": ms}})
        kids.append(kid)
    best = kids[0]
    assert engine.select() == best.id  # the policy's pick, before any steering
    engine.steer("ada", "prune", best.id)
    for attempt in range(30):  # never selected again, whatever the exploration draws
        engine.tree.settings["seed"] = attempt
        assert engine.select() != best.id
    engine.steer("ada", "pin", kids[2].id)
    assert engine.select() == kids[2].id
    pinned_child = engine.start_child(kids[2].id)
    assert pinned_child.parent == kids[2].id and not engine.tree.meta["steering"]["pins"]  # the pin is spent

    with pytest.raises(SteeringError) as bad:
        engine.steer("ada", "try", best.id, anchored_source=skeleton(best.source), instructions=["x"])
    assert bad.value.field == "node" and "pruned" in bad.value.message
    mine = skeleton(kids[1].source)
    outside = mine.replace("import torch.nn as nn", "import torch.nn as nn  # edited outside")
    with pytest.raises(SteeringError) as bad:
        engine.steer("ada", "try", kids[1].id, anchored_source=outside, instructions=["x"])
    assert bad.value.field == "anchored_source" and "skeleton line" in bad.value.message
    engine.steer("ada", "try", kids[1].id, anchored_source=mine, instructions=["ada's plan: one fused pass"])
    assert engine.select() == kids[1].id
    attempt = engine.expand(kids[1].id)
    assert attempt.anchored_source == mine and attempt.instructions == ["ada's plan: one fused pass"]
    assert attempt.status == "building" and attempt.human[0]["action"] == "try"
    assert "INSTRUCTION 1: ada's plan: one fused pass" in code_prompts(stub)[-1]
    assert not engine.tree.meta["steering"]["tries"]
