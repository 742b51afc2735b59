"""The real SDKs against the stub server: both APIs, plain and streamed, usage, keys, temperature."""

from __future__ import annotations

import itertools

import pytest

from search.llm import LLMClient, load_prices, role_settings
from search.llm.tokens import estimate_tokens
from tests.llm.stub_server import Reply, StubLLMServer

KEY = "sk-test-0123456789abcdef"
PROVIDERS = ("anthropic", "openai", "openai-compatible")
_models = itertools.count()


def client(stub: StubLLMServer, provider: str, stream: bool, role: str = "plan", **extra: object) -> LLMClient:
    options = {"provider": provider, "base_url": stub.url, "api_key": KEY, "stream": stream,
               "model": f"claude-sonnet-4-6-test-{next(_models)}", "retry_base_s": 0.01, **extra}
    return LLMClient(role_settings(options, role), prices=load_prices({}))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("stream", [True, False])
def test_it_returns_text_usage_and_cost(stub: StubLLMServer, provider: str, stream: bool) -> None:
    text = "Here is the kernel.\n```python\nprint('hi')\n```\n" * 3
    stub.push(Reply(text, input_tokens=1000, output_tokens=200, cache_read_tokens=400, chunk_chars=7))
    chunks: list[str] = []
    answer, record = client(stub, provider, stream).complete("system prompt", "user prompt", chunks.append,
                                                             prompt_version="plan/1")
    assert answer == text
    assert "".join(chunks) == text
    assert len(chunks) == (len(text) + 6) // 7 if stream else len(chunks) == 1
    assert record.output_tokens == 200
    assert record.cache_read_tokens == 400
    # Anthropic reports uncached input separately; the record always counts the whole prompt.
    assert record.input_tokens == (1400 if provider == "anthropic" else 1000)
    fresh = record.input_tokens - 400
    assert record.cost_usd == pytest.approx((fresh * 3 + 400 * 0.3 + 200 * 15) / 1e6)
    assert record.price_known and record.streamed is stream and record.retries == 0
    assert record.prompt_version == "plan/1" and record.latency_s > 0


@pytest.mark.parametrize("provider", PROVIDERS)
def test_it_sends_key_model_temperature_and_prompts(stub: StubLLMServer, provider: str) -> None:
    llm = client(stub, provider, True, role="code", max_tokens=1234)
    llm.complete("the stable system prompt", "the question")
    request = stub.requests[-1]
    assert request.credential == KEY
    assert request.temperature == 0.1
    assert request.body["model"] == llm.settings.model
    assert request.body["stream"] is True
    if provider == "anthropic":
        assert request.path == "/v1/messages"
        assert request.body["max_tokens"] == 1234
        assert request.body["system"] == [{"type": "text", "text": "the stable system prompt",
                                           "cache_control": {"type": "ephemeral"}}]
        assert request.body["messages"] == [{"role": "user", "content": "the question"}]
    else:
        assert request.path == "/v1/chat/completions"
        assert request.body["stream_options"] == {"include_usage": True}
        limit_key = "max_completion_tokens" if provider == "openai" else "max_tokens"
        assert request.body[limit_key] == 1234
        # Only api.openai.com gets a prompt cache key; local servers may reject unknown fields.
        assert ("prompt_cache_key" in request.body) is (provider == "openai")
        assert request.body["messages"][0] == {"role": "system", "content": "the stable system prompt"}


def test_it_can_turn_prompt_caching_off(stub: StubLLMServer) -> None:
    client(stub, "anthropic", False, prompt_caching=False).complete("sys", "q")
    assert stub.requests[-1].body["system"] == [{"type": "text", "text": "sys"}]


def test_it_estimates_usage_when_a_server_reports_none(stub: StubLLMServer) -> None:
    """Some local servers omit usage; tokens are estimated so cost limits and records still work."""
    raw = ('{"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": '
           '[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "abcdefgh"}}]}')
    stub.push(Reply(raw_body=raw.encode()))
    code = "    y = torch.relu(x[:, :n]) * 2\n" * 20
    text, record = client(stub, "openai-compatible", False).complete(code, "q")
    assert text == "abcdefgh"
    # Code-aware: symbols and short identifiers are tokens, so code is more than 4 chars a token.
    assert record.input_tokens == estimate_tokens(code + "q") > len(code) / 3.5
    assert record.output_tokens == 2
    assert any("estimated" in note for note in record.notes)


def test_an_unpriced_local_model_costs_nothing(stub: StubLLMServer) -> None:
    llm = LLMClient(role_settings({"provider": "openai-compatible", "base_url": stub.url,
                                   "model": "qwen2.5-coder:32b"}, "plan"), prices=load_prices({}))
    _, record = llm.complete("s", "q")
    assert record.cost_usd == 0.0 and not record.price_known
    assert stub.requests[-1].credential == "no-key"
