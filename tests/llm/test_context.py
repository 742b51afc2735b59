"""Connect timeout 10 s, read as configured; token counts by the provider's counter (the
stub's count_tokens, tiktoken when installed) or a code-aware estimate; a context-length error shrinks the
window once, then stops with a message naming --context-tokens and --max-tokens."""

from __future__ import annotations

from typing import Any

import pytest

from search.engine.agents import AgentError
from search.llm import LLMClient, load_prices, role_settings
from search.llm.tokens import estimate_tokens
from search.teams.llm.fit import shrunk_budget
from tests.llm.stub_server import Reply, StubLLMServer
from tests.llm.teams_support import add_failed_child, engine_for, options

VLLM_TOO_LONG = ("This model's maximum context length is {context} tokens. However, you requested {total} tokens "
                 "({prompt} in the messages, {answer} in the completion). Please reduce the length of the "
                 "messages or completion.")

# Without numbers: the window is halved.
TOO_LONG = "This model's maximum context length was exceeded; reduce the length of the messages or completion."


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-compatible"])
def test_connect_waits_10_s_and_reading_as_configured(stub: StubLLMServer, provider: str) -> None:
    llm = LLMClient(role_settings({"provider": provider, "base_url": stub.url, "api_key": "k" * 20, "model": "m",
                                   "timeout_s": 321}, "plan"), prices=load_prices({}))
    timeout = llm.provider.client.timeout
    assert timeout.connect == 10.0 and timeout.read == 321.0


def test_the_estimate_counts_code_denser_than_four_characters_a_token() -> None:
    code = ("    out = torch.empty_like(x)\n    n = x.numel()\n"
            "    kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)\n    return out * scale + bias\n") * 20
    assert estimate_tokens(code) > 1.15 * len(code) / 4
    prose = "The plan agent marks the spans of the node that must change and says what to do there. " * 20
    assert len(prose) / 5 < estimate_tokens(prose) < len(prose) / 3


def test_anthropic_counts_with_its_own_counter(stub: StubLLMServer) -> None:
    llm = LLMClient(role_settings({"provider": "anthropic", "base_url": stub.url, "api_key": "k" * 20,
                                   "model": "claude-sonnet-4-6"}, "plan"), prices=load_prices({}))
    assert llm.count_tokens("x" * 300) == (100, "anthropic counter")
    assert stub.count_requests[-1].body["messages"] == [{"role": "user", "content": "x" * 300}]
    local = LLMClient(role_settings({"provider": "openai-compatible", "base_url": stub.url, "model": "q"}, "plan"))
    assert local.count_tokens("x" * 300) == (estimate_tokens("x" * 300), "estimate") and not stub.requests


def big_engine(stub: StubLLMServer, results: dict, provider: str, **extra: Any) -> Any:
    """A tree whose root has failed children, so the plan window has items the budget can drop."""
    engine = engine_for("stark", options(stub, provider, max_tokens=1000, **extra), results, [])
    for _ in range(4):
        add_failed_child(engine, results)
    return engine


@pytest.mark.slow  # its problem is inspected in a harness child
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_context_length_error_shrinks_the_window_once(stub: StubLLMServer, results: dict, provider: str,
                                                        stream: bool) -> None:
    engine = big_engine(stub, results, provider, stream=stream)
    stub.push(Reply(status=400, error_message=TOO_LONG))
    child = engine.expand(0)
    assert child.status == "building"
    first, second = stub.requests[0].text, stub.requests[1].text
    assert len(second) < len(first)  # the same prompt with less of the window
    plan = child.usage["calls"][0]
    assert any("window shrunk" in note for note in plan["notes"])
    # The agent keeps the smaller window: the next attempt's plan call (its window one node larger) fits at once.
    assert engine.team.plan.shrunk_to is not None
    engine.expand(0)
    assert len(stub.requests) == 5 and len(stub.requests[3].text) < len(first)


@pytest.mark.slow  # its problem is inspected in a harness child
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_second_context_length_error_names_the_options(stub: StubLLMServer, results: dict, provider: str) -> None:
    engine = big_engine(stub, results, provider)
    too_long = Reply(status=400, error_message=TOO_LONG)
    stub.push(too_long, too_long, Reply("never reached"))
    with pytest.raises(AgentError) as info:
        engine.expand(0)
    message = info.value.message
    assert info.value.permanent and "even with the window shrunk" in message
    assert "--context-tokens" in message and "--max-tokens (now 1000)" in message
    assert len(stub.requests) == 2


@pytest.mark.parametrize("message,budget,expected", [
    (VLLM_TOO_LONG.format(context=32768, total=38912, prompt=30720, answer=8192), 30_000, int((30_000 - 6144) * 0.9)),
    ("input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length",
     150_000, int((150_000 - 9573) * 0.9)),
    ("prompt is too long: 210000 tokens > 200000 maximum", 190_000, int((190_000 - 18192) * 0.9)),
    ("context length exceeded", 30_000, 15_000),
    (VLLM_TOO_LONG.format(context=32768, total=40000, prompt=31808, answer=8192), 5_000, None),  # nothing useful left
])
def test_the_shrink_follows_the_servers_numbers(message: str, budget: int, expected: int | None) -> None:
    max_tokens = 21333 if "21333" in message else 8192
    assert shrunk_budget(message, budget, max_tokens, budget) == expected


@pytest.mark.slow  # its problem is inspected in a harness child
def test_a_window_over_budget_by_the_providers_count_is_rendered_smaller(stub: StubLLMServer, results: dict) -> None:
    engine = big_engine(stub, results, "anthropic", context_tokens=1000)
    child = engine.expand(0)
    assert stub.count_requests  # the real count was asked for
    notes = child.usage["calls"][0]["notes"]
    assert any("over the budget of 1000" in note and "anthropic counter" in note for note in notes), notes
