"""The LLM teams through the real engine, the real SDKs and the stub vendor server.

The reference (and one broken candidate) are evaluated for real once per session; each test then
drives `Engine.expand`, so the agents' calls, re-asks, errors and usage are checked attempt by attempt.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from search.engine.agents import AgentError
from search.engine.engine import Engine
from search.engine.events import Event
from search.engine.tree import Tree
from search.teams import get_team
from search.teams.llm_teams import LLM_TEAM_NAMES, build_team
from tests.llm.stub_server import Reply, StubLLMServer

PROBLEM = (Path(__file__).parent / "fixtures" / "tiny_relu.py").read_text()
SECRET = "sk-secret-never-logged-7777"
FAST = {"device": "cpu", "timing_runs": 3, "warmup_runs": 1, "correctness_trials": 2, "baselines": ["eager"],
        "roofline": False}
# Fails for real, and tells whether a vendor key leaked into the candidate's process.
BROKEN = ("raise RuntimeError('kernel launch failed: invalid configuration argument; key visible: %s'"
          " % any(k in __import__('os').environ for k in ('ANTHROPIC_API_KEY', 'STARK_LLM_API_KEY')))")


def evaluate(problem: str, candidate: str, settings: dict[str, Any]) -> dict[str, Any]:
    from kernels import evaluate as kernels_evaluate

    return kernels_evaluate(problem, candidate, {**FAST, **settings}).to_dict()


@pytest.fixture(scope="session")
def results() -> dict[str, dict[str, Any]]:
    """Real evaluations: the reference passes; a candidate that raises in forward fails, and never
    sees the vendor keys the search process holds."""
    tree = Tree(PROBLEM)
    root = evaluate(PROBLEM, tree.root.source, {})
    lines = tree.root.source.splitlines()
    at = max(k for k, line in enumerate(lines) if line.lstrip().startswith("def forward"))
    pad = " " * (len(lines[at]) - len(lines[at].lstrip()) + 4)
    broken_source = "\n".join(lines[:at + 1] + [pad + BROKEN] + lines[at + 1:]) + "\n"
    saved = {k: os.environ.get(k) for k in ("ANTHROPIC_API_KEY", "STARK_LLM_API_KEY")}
    os.environ.update(dict.fromkeys(saved, SECRET))
    try:
        broken = evaluate(PROBLEM, broken_source, {})
    finally:
        for k, v in saved.items():
            if v is None:
                del os.environ[k]
            else:
                os.environ[k] = v
    assert root["verdict"] == "pass" and broken["verdict"] != "pass", (root["reasons"], broken["reasons"])
    dumped = json.dumps(broken)
    assert "key visible: False" in dumped and SECRET not in dumped
    return {"root": root, "broken": broken, "broken_source": {"source": broken_source}}


def options(stub: StubLLMServer, provider: str = "anthropic", **extra: Any) -> dict[str, Any]:
    return {"provider": provider, "base_url": stub.url, "model": "claude-sonnet-4-6", "api_key": SECRET,
            "retry_base_s": 0.01, **extra}


def engine_for(team_name: str, opts: dict[str, Any], results: dict[str, Any], events: list[Event]) -> Engine:
    tree = Tree(PROBLEM, {"target": "cpp", "device": "cpu"})
    engine = Engine(tree, get_team(team_name, opts), evaluate, events.append)
    engine.record(0, results["root"])
    return engine


def add_failed_child(engine: Engine, results: dict[str, Any]) -> int:
    child = engine.tree.add_child(0, "plan+code", source=results["broken_source"]["source"])
    engine.record(child.id, results["broken"])
    return child.id


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_stark_plans_at_08_codes_at_01_and_records_usage(stub: StubLLMServer, results: dict, provider: str) -> None:
    events: list[Event] = []
    engine = engine_for("stark", options(stub, provider), results, events)
    child = engine.expand(0)
    assert child.status == "building" and child.role == "plan+code"
    assert child.instructions == ["rewrite the body of forward as a single fused pass over the input"]
    assert "IMPROVE" in child.anchored_source and "IMPROVE" not in child.source
    assert [(r.temperature, r.credential) for r in stub.requests] == [(0.8, SECRET), (0.1, SECRET)]
    calls = child.usage["calls"]
    assert [(c["role"], c["temperature"], c["provider"]) for c in calls] == [("plan", 0.8, provider), ("code", 0.1, provider)]
    assert child.usage["input_tokens"] == sum(c["input_tokens"] for c in calls) > 0
    assert child.usage["cost_usd"] == pytest.approx(sum(c["cost_usd"] for c in calls)) and child.usage["cost_usd"] > 0
    pieces = [e.data["text"] for e in events if e.type == "node.stream" and e.node == child.id]
    streamed = "".join(pieces)
    assert "INSTRUCTION 1:" in streamed and "fused pass (stub code agent)" in streamed
    # The stub streams 16-character chunks; the UI gets them batched, not one event per chunk.
    assert 2 <= len(pieces) <= len(streamed) // 100 + 2
    assert [e.data["role"] for e in events if e.type == "agent.call"] == ["plan", "code"]


@pytest.mark.slow
def test_a_malformed_plan_is_reasked_with_the_reason_and_its_tokens_counted(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("stark", options(stub), results, [])
    stub.push(Reply("I would fuse relu and the scale.", output_tokens=50))
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1
    assert "no fenced code block" in stub.requests[1].text and "was rejected" in stub.requests[1].text
    assert [c["role"] for c in child.usage["calls"]] == ["plan", "plan", "code"]
    assert child.usage["calls"][0]["output_tokens"] == 50
    assert "malformed answer" in child.agent_log


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_an_answer_cut_off_at_max_tokens_says_how_to_fix_it(stub: StubLLMServer, results: dict, provider: str) -> None:
    engine = engine_for("stark", options(stub, provider, max_tokens=64), results, [])
    stub.push(Reply("INSTRUCTION 1: fuse\n```python\nimport torch\nclass ModelNew:", truncated=True))
    child = engine.expand(0)
    assert child.reasks == 1 and child.status == "building"
    assert "cut off" in child.agent_log and "output limit of 64 tokens; raise --max-tokens" in child.agent_log
    assert child.usage["calls"][0]["stop_reason"] in ("max_tokens", "length")


@pytest.mark.slow
def test_a_plan_malformed_past_the_bound_fails_the_attempt(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("stark", options(stub, max_reasks=1), results, [])
    stub.push(Reply("no code"), Reply("```python\nclass ModelNew: pass\n```"))
    child = engine.expand(0)
    assert child.status == "failed" and child.verdict == "malformed"
    assert "no span is marked" in " ".join(child.reasons)
    assert len(child.usage["calls"]) == 2


@pytest.mark.slow
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_bad_key_stops_the_run_with_the_fix(stub: StubLLMServer, results: dict, provider: str) -> None:
    engine = engine_for("stark", options(stub, provider), results, [])
    stub.push(Reply(status=401, error_message="invalid api key"))
    with pytest.raises(AgentError) as info:
        engine.expand(0)
    assert info.value.permanent and "valid key" in info.value.message
    child = engine.tree[1]
    assert child.verdict == "agent_error" and len(stub.requests) == 1


@pytest.mark.slow
def test_the_debug_agent_fixes_a_failed_node_at_01(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("stark", options(stub, debug_model="claude-haiku-4-5"), results, [])
    failed = add_failed_child(engine, results)
    child = engine.expand(failed)
    assert child.role == "debug" and child.status == "building"
    request = stub.requests[-1]
    assert request.temperature == 0.1 and request.body["model"] == "claude-haiku-4-5"
    assert "kernel launch failed" in request.text  # the failure is in the debug window
    assert "minimal fix (stub debug agent)" in child.source


@pytest.mark.slow
def test_sampling_uses_one_agent_writing_whole_files(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("sampling", options(stub, "openai-compatible"), results, [])
    child = engine.expand(0)
    assert child.status == "building" and "rewritten (stub single agent)" in child.source
    assert [(r.temperature, "you are the only agent" in r.text) for r in stub.requests] == [(0.8, True)]
    assert [c["role"] for c in child.usage["calls"]] == ["single"]


@pytest.mark.slow
def test_reflexion_debugs_its_failed_attempt_with_the_debug_temperature(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("reflexion", options(stub), results, [])
    failed = add_failed_child(engine, results)
    assert engine.select() == failed
    child = engine.expand(failed)
    assert child.role == "debug" and stub.requests[-1].temperature == 0.1


@pytest.mark.slow
def test_the_cost_limit_stops_before_the_next_call(stub: StubLLMServer, results: dict) -> None:
    engine = engine_for("stark", options(stub, cost_limit_usd=1e-9), results, [])
    with pytest.raises(AgentError) as info:
        engine.expand(0)
    assert info.value.permanent and "cost limit reached" in info.value.message
    assert len(stub.requests) == 1  # the plan call was made, the code call was not


@pytest.mark.slow
def test_the_key_never_reaches_the_tree_events_or_logs(stub: StubLLMServer, results: dict) -> None:
    events: list[Event] = []
    engine = engine_for("stark", options(stub), results, events)
    stub.push(Reply(status=500), Reply("no code"))
    engine.expand(0)
    dumped = engine.tree.to_json() + json.dumps([e.to_dict() for e in events], default=str)
    dumped += repr(engine.team.plan) + repr(engine.team.plan.client) + json.dumps(engine.team.settings)
    assert SECRET not in dumped
    assert SECRET[-4:] in repr(engine.team.plan.client.settings.to_dict())  # shown redacted


@pytest.mark.parametrize("name", LLM_TEAM_NAMES)
def test_every_team_builds_with_its_policy(name: str) -> None:
    team = build_team(name, {"provider": "anthropic", "api_key": SECRET, "eps": 0.5})
    expected = {"stark": "adaptive-egreedy", "sampling": "best-of-k", "reflexion": "reflexion",
                "search-single": "adaptive-egreedy", "ma-only": "best-of-k"}[name]
    assert team.policy.name == expected
    assert (team.plan is None) == (name in ("sampling", "reflexion", "search-single"))
    assert (team.debug is None) == (name == "sampling")
    if expected == "adaptive-egreedy":
        assert team.policy.eps == 0.5
    greedy = build_team(name, {"provider": "anthropic", "api_key": SECRET, "policy": "greedy"})
    assert greedy.policy.name == "greedy" and greedy.debug is not None
