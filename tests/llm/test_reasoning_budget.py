"""Default models from one dated table with the SDKs' deprecation marks; reasoning models get headroom
on top of the answer's tokens, their reasoning tokens are recorded, a cut-off or empty answer is asked once more with a
larger limit, then fails naming --max-tokens; Anthropic thinking goes through the SDK's typed parameters (adaptive
where the model takes it); thinking forbids a role's temperature, which --strict-temperatures turns into an error."""

from __future__ import annotations

import logging
import typing

import pytest
from anthropic.types import ModelParam
from openai.types import ChatModel

from search.llm import ConfigError, LLMClient, load_prices, role_settings
from search.llm.models import DEFAULT_MODEL, DEFAULTS, openai_shutdowns, retirement
from search.llm.settings import THINKING_BUDGET
from search.teams.llm_teams import build_team
from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import Reply, StubLLMServer
from tests.llm.teams_support import options, quick_engine

KEY = "sk-test-0123456789abcdef"


def client(stub: StubLLMServer, provider: str, model: str, **extra: object) -> LLMClient:
    opts = {"provider": provider, "base_url": stub.url, "api_key": KEY, "model": model, "max_tokens": 1000, **extra}
    return LLMClient(role_settings(opts, "plan"), prices=load_prices({}))


def test_the_defaults_are_listed_and_not_retired() -> None:
    assert {p: m for p, (m, _) in DEFAULTS.items()} == DEFAULT_MODEL
    assert DEFAULT_MODEL["openai"] in typing.get_args(ChatModel)
    assert DEFAULT_MODEL["anthropic"] in typing.get_args(typing.get_args(ModelParam)[0])
    assert all(retirement(p, m) is None for p, m in DEFAULT_MODEL.items())
    assert role_settings({"provider": "openai", "api_key": KEY}, "plan", {}).model == DEFAULT_MODEL["openai"]
    assert openai_shutdowns()["gpt-5"] == "2026-12-11"  # read from the installed SDK, not from us


def test_a_deprecated_model_is_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        team = build_team("stark", {"provider": "openai", "api_key": KEY, "model": "gpt-5"})
    assert "gpt-5 shuts down on 2026-12-11" in caplog.text or "gpt-5 was shut down on 2026-12-11" in caplog.text
    assert team.settings["model_warnings"] and "openai SDK" in team.settings["model_warnings"][0]
    assert "end of life" in (retirement("anthropic", "claude-opus-4-5") or "")


@pytest.mark.parametrize("stream", [True, False])
def test_an_openai_reasoning_model_gets_headroom_and_its_reasoning_tokens_recorded(stream: bool) -> None:
    with StubLLMServer() as stub:
        stub.push(Reply("answer", output_tokens=10, reasoning_tokens=700))
        _, record = client(stub, "openai", "gpt-5.5", stream=stream).complete("s", "q")
        body = stub.requests[-1].body
        assert body["max_completion_tokens"] == 1000 + THINKING_BUDGET["medium"] and "max_tokens" not in body
        assert record.reasoning_tokens == 700 and record.output_tokens == 710
        assert record.max_tokens_sent == 1000 + THINKING_BUDGET["medium"]
        assert record.cost_usd == pytest.approx((record.input_tokens * 5.0 + 710 * 30.0) / 1e6)  # gpt-5.5's own price
        client(stub, "openai", "gpt-4.1").complete("s", "q")  # not a reasoning model: the answer's limit only
        assert stub.requests[-1].body["max_completion_tokens"] == 1000


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("model,thinking", [
    ("claude-sonnet-4-6", {"type": "adaptive"}),
    ("claude-opus-4-6", {"type": "adaptive"}),
    ("claude-sonnet-4-5-20250929", {"type": "enabled", "budget_tokens": 2048}),
])
def test_anthropic_thinking_goes_through_the_typed_parameters(stream: bool, model: str, thinking: dict) -> None:
    with StubLLMServer() as stub:
        stub.push(Reply("answer", output_tokens=10, reasoning_tokens=300))
        _, record = client(stub, "anthropic", model, stream=stream, reasoning_effort="low").complete("s", "q")
        body = stub.requests[-1].body
        assert body["thinking"] == thinking and "temperature" not in body
        assert body["max_tokens"] == 1000 + 2048
        assert body.get("output_config") == ({"effort": "low"} if thinking["type"] == "adaptive" else None)
        assert record.reasoning_tokens == 300 and record.temperature_dropped == "reasoning"


def test_strict_temperatures_refuse_a_thinking_role() -> None:
    with pytest.raises(ConfigError, match="refused the plan agent's temperature 0.8.*reasoning effort high"):
        build_team("stark", {"provider": "anthropic", "api_key": KEY, "plan_reasoning_effort": "high",
                             "strict_temperatures": True})


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_cut_off_answer_is_asked_once_more_with_a_larger_limit(provider: str) -> None:
    with StubLLMServer(kernel_responder) as stub:
        stub.push(Reply("", truncated=True, reasoning_tokens=900))  # all spent on reasoning: nothing left to parse
        engine = quick_engine("stark", options(stub, provider, max_tokens=1000))
        child = engine.expand(0)
        assert child.status == "building" and child.reasks == 0
        limits = [r.body.get("max_tokens") or r.body.get("max_completion_tokens") for r in stub.requests]
        assert limits[:2] == [1000, 2000]
        plan_calls = [c for c in child.usage["calls"] if c["role"] == "plan"]
        assert len(plan_calls) == 2 and "asked again once with an answer limit of 2000" in plan_calls[1]["notes"][-1]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_cut_off_twice_fails_naming_max_tokens(provider: str) -> None:
    with StubLLMServer(lambda request: Reply("```python\nimport torch", truncated=True)) as stub:
        engine = quick_engine("stark", options(stub, provider, max_tokens=1000, max_reasks=0))
        child = engine.expand(0)
        assert child.verdict == "malformed" and "raise --max-tokens (now 1000)" in child.reasons[0]
        assert "with 1000 and then 2000 answer tokens" in child.reasons[0] and len(stub.requests) == 2

