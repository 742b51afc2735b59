"""The paper's baselines are what they claim: best-of-K draws independent samples from the
root's window alone, and the single-agent baselines use one agent at one temperature for writing and
fixing. Through the real engine loop, the real SDKs of both providers, the stub vendor and real evaluations."""

from __future__ import annotations

import re

import pytest

from search.engine.loop import run as run_loop
from tests.llm.kernel_responder import role_of
from tests.llm.stub_server import StubLLMServer
from tests.llm.teams_support import add_failed_child, engine_for, options

PROVIDERS = ["anthropic", "openai-compatible"]


def without_attempt_number(text: str) -> str:
    return re.sub(r"\(attempt \d+\)", "(attempt N)", text)


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("team", ["sampling", "ma-only"])
def test_the_kth_best_of_k_prompt_holds_no_earlier_sample(stub: StubLLMServer, results: dict, provider: str,
                                                          team: str) -> None:
    engine = engine_for(team, options(stub, provider), results, [])
    summary = run_loop(engine, budget=3, parallel=1)
    samples = [n for n in engine.tree if n.parent is not None]
    assert summary.attempts == 3 and all(n.parent == 0 and n.verdict for n in samples)
    assert any(n.runtime_ms is not None for n in samples)  # earlier samples had timings that could leak
    by_role: dict[str, list[str]] = {}
    for request in stub.requests:
        by_role.setdefault(role_of(request), []).append(request.text)
    assert set(by_role) == ({"single"} if team == "sampling" else {"plan", "code"})
    for role, texts in by_role.items():
        assert len(texts) == 3
        for text in texts[1:]:
            for n in samples:
                assert f"node {n.id}," not in text, (role, n.id)
            assert "## a child of i" not in text and "Diff against" not in text and "## a leaderboard" not in text
        # The k-th sample is asked exactly what the first was: the root's window alone.
        assert len({without_attempt_number(t) for t in texts}) == 1, role
    assert engine.team.settings["memory"] is False


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("team", ["reflexion", "search-single"])
def test_the_single_agent_baselines_write_and_fix_as_one_role_at_one_temperature(
        stub: StubLLMServer, results: dict, provider: str, team: str) -> None:
    engine = engine_for(team, options(stub, provider, single_temperature=0.6), results, [])
    failed = add_failed_child(engine, results)
    fixed = engine.expand(failed)
    written = engine.expand(0)
    assert fixed.role == "debug" and fixed.status == "building" and "rewritten (stub single agent)" in fixed.source
    assert written.role == "plan+code" and written.status == "building"
    # Reflexion reflects on the failed node first: one more call, same agent, same temperature.
    assert [r.temperature for r in stub.requests] == [0.6] * (3 if team == "reflexion" else 2)
    assert {role_of(r) for r in stub.requests} == {"single"}  # no DEBUG agent prompt
    fix = stub.requests[1 if team == "reflexion" else 0].text
    assert "it failed; fix it" in fix and "kernel launch failed" in fix
    calls = fixed.usage["calls"] + written.usage["calls"]
    assert {(c["role"], c["temperature"]) for c in calls} == {("single", 0.6)}
    settings = engine.team.settings
    assert settings["code_llm"] == settings["debug_llm"] and settings["code_llm"].endswith("@T=0.6")
    assert settings["memory"] is True and engine.team.code is engine.team.debug


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_parallel_attempts_see_each_others_instructions(stub: StubLLMServer, results: dict, provider: str) -> None:
    """An attempt planned while another from the same node is in flight (being evaluated) is told
    what that one was asked to do, so parallel attempts diverge; once it finished it is an ordinary child."""
    engine = engine_for("stark", options(stub, provider), results, [])
    first = engine.expand(0)
    assert first.status == "building" and not first.finished  # in flight: its candidate awaits evaluation
    second = engine.expand(0)
    plans = [r.text for r in stub.requests if role_of(r) == "plan"]
    assert len(plans) == 2 and "being tried" not in plans[0].split("## the node you work on")[1]
    seen = plans[1].split("## the node you work on")[1]
    assert f"## being tried (in flight from node 0, do not repeat it): node {first.id}," in seen
    assert f"Instruction: {first.instruction}" in seen
    third_window = engine.window("plan", 0, engine.start_child(0))
    assert {it.node.id for it in third_window.items if it.relation == "in-flight"} == {first.id, second.id}
