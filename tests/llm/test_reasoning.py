"""Reasoning models: `--reasoning-effort` per role reaches OpenAI as reasoning_effort and Anthropic as an
extended-thinking budget on top of max_tokens; the temperature is then not sent, and the call record says so."""

from __future__ import annotations

import itertools

import pytest

from search.llm import ConfigError, LLMClient, load_prices, role_settings
from tests.llm.stub_server import StubLLMServer

_models = itertools.count()


def client(stub: StubLLMServer, provider: str, stream: bool, **extra: object) -> LLMClient:
    options = {"provider": provider, "base_url": stub.url, "api_key": "sk-test-0123456789abcdef", "stream": stream,
               "model": f"claude-sonnet-4-6-r{next(_models)}", "max_tokens": 1000, **extra}
    return LLMClient(role_settings(options, "plan"), prices=load_prices({}))


@pytest.mark.parametrize("stream", [True, False])
def test_anthropic_thinks_with_a_budget_and_no_temperature(stub: StubLLMServer, stream: bool) -> None:
    llm = client(stub, "anthropic", stream, plan_reasoning_effort="medium")
    text, record = llm.complete("s", "q")
    body = stub.requests[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 1000 + 8192 and "temperature" not in body
    assert record.temperature is None and record.temperature_requested == 0.8
    assert "not sent: reasoning effort medium (thinking budget 8192 tokens)" in record.notes[0]
    assert llm.settings.to_dict()["reasoning_effort"] == "medium"
    # The cost limit's worst case counts the thinking tokens too.
    assert llm.worst_case_usd("", []) == pytest.approx((1000 + 8192) * 15 / 1e6)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_openai_gets_reasoning_effort_and_no_temperature(stub: StubLLMServer, stream: bool, provider: str) -> None:
    _, record = client(stub, provider, stream, reasoning_effort="high").complete("s", "q")
    body = stub.requests[-1].body
    assert body["reasoning_effort"] == "high" and "temperature" not in body and "thinking" not in body
    assert record.temperature is None and "not sent: reasoning effort high takes none" in record.notes[0]


def test_a_role_without_effort_keeps_its_temperature(stub: StubLLMServer) -> None:
    llm = LLMClient(role_settings({"provider": "anthropic", "base_url": stub.url, "api_key": "k" * 20,
                                   "model": "m", "plan_reasoning_effort": "low"}, "code"), prices=load_prices({}))
    llm.complete("s", "q")
    body = stub.requests[-1].body
    assert body["temperature"] == 0.1 and "thinking" not in body


def test_an_unknown_effort_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="minimal, low, medium, high"):
        role_settings({"provider": "openai", "api_key": "k", "reasoning_effort": "extreme"}, "plan", {})
