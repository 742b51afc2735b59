"""Failures classified by the provider's error type (the body), not only the HTTP status, through
the real SDKs against the stub server replaying the vendors' error shapes: a mid-stream overload is retried,
quota and `x-should-retry: false` stop at once, the servers' waits are honoured, SDK misuse is a crash."""

from __future__ import annotations

import email.utils
import itertools
import time
from typing import Any

import pytest

from search.llm import LLMClient, LLMError, load_prices, role_settings
from search.llm.failures import retry_after
from tests.llm.stub_server import Reply, StubLLMServer

KEY = "sk-test-0123456789abcdef"
_models = itertools.count()


class Sleeps(list):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(stub: StubLLMServer, provider: str, stream: bool = True, sleeps: Sleeps | None = None,
           **extra: object) -> LLMClient:
    options = {"provider": provider, "base_url": stub.url, "api_key": KEY, "model": f"m-{next(_models)}",
               "stream": stream, "retry_base_s": 1.0, "max_retries": 3, **extra}
    return LLMClient(role_settings(options, "plan"), prices=load_prices({}),
                     sleep=Sleeps() if sleeps is None else sleeps)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_mid_stream_overload_is_retried(stub: StubLLMServer, provider: str) -> None:
    """HTTP 200, some text, then `event: error` overloaded_error (Anthropic) / `data: {"error": ...}` (OpenAI)."""
    stub.push(Reply("partial answer that never finishes", stream_error_after=2, error_message="Overloaded",
                    error_type="overloaded_error" if provider == "anthropic" else "server_error"),
              Reply("whole answer"))
    chunks: list[str] = []
    text, record = client(stub, provider).complete("s", "q", chunks.append)
    assert text == "whole answer" and record.retries == 1 and len(stub.requests) == 2
    assert "mid-stream error" in record.notes[0] and "Overloaded" in record.notes[0]
    assert "[retrying:" in "".join(chunks)  # the UI sees why the text starts over


@pytest.mark.parametrize("provider,status", [("anthropic", 529), ("openai", 503)])
def test_an_overload_without_a_stream_is_retried(stub: StubLLMServer, provider: str, status: int) -> None:
    stub.push(Reply(status=status, error_message="Overloaded"), Reply("fine"))
    text, record = client(stub, provider, stream=False).complete("s", "q")
    assert text == "fine" and record.retries == 1


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("provider,reply,words", [
    ("openai", Reply(status=429, error_type="insufficient_quota", error_code="insufficient_quota",
                     error_message="You exceeded your current quota, please check your plan and billing details."),
     "platform.openai.com/settings/organization/billing"),
    ("anthropic", Reply(status=400, error_type="invalid_request_error",
                        error_message="Your credit balance is too low to access the Anthropic API."),
     "console.anthropic.com/settings/billing"),
    ("anthropic", Reply(status=402, error_type="billing_error", error_message="payment required"),
     "console.anthropic.com/settings/billing"),
])
def test_quota_and_billing_stop_at_once_naming_the_fix(stub: StubLLMServer, stream: bool, provider: str,
                                                       reply: Reply, words: str) -> None:
    stub.push(reply, Reply("never reached"))
    with pytest.raises(LLMError) as info:
        client(stub, provider, stream).complete("s", "q")
    assert info.value.permanent and info.value.kind == "quota"
    assert "out of credits or quota" in info.value.message and words in info.value.message
    assert len(stub.requests) == 1


def test_a_rate_limit_that_mentions_billing_is_still_a_rate_limit(stub: StubLLMServer) -> None:
    stub.push(Reply(status=429, error_type="requests", error_code="rate_limit_exceeded",
                    error_message="Rate limit reached for gpt-5 on requests per min (RPM): Limit 3. You can increase "
                                  "your rate limit by adding a payment method at https://platform.openai.com/account/billing."),
              Reply("ok"))
    text, record = client(stub, "openai").complete("s", "q")
    assert text == "ok" and record.retries == 1


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_x_should_retry_false_is_honoured(stub: StubLLMServer, provider: str, stream: bool) -> None:
    stub.push(Reply(status=429, error_message="rate limit", headers={"x-should-retry": "false"}), Reply("no"))
    with pytest.raises(LLMError) as info:
        client(stub, provider, stream).complete("s", "q")
    assert info.value.permanent and "x-should-retry: false" in info.value.message
    assert len(stub.requests) == 1


def test_x_should_retry_true_retries_even_a_400(stub: StubLLMServer) -> None:
    stub.push(Reply(status=400, error_message="try again", headers={"x-should-retry": "true"}), Reply("ok"))
    text, record = client(stub, "anthropic").complete("s", "q")
    assert text == "ok" and record.retries == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_the_servers_wait_is_honoured_in_ms_seconds_and_as_a_date(stub: StubLLMServer, provider: str) -> None:
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    sleeps = Sleeps()
    stub.push(Reply(status=429, headers={"retry-after-ms": "12500"}),
              Reply(status=429, headers={"retry-after": date}), Reply("ok"))
    _, record = client(stub, provider, sleeps=sleeps).complete("s", "q")
    assert record.retries == 2
    assert sleeps[0] == 12.5
    assert 27 <= sleeps[1] <= 31


def test_a_wait_longer_than_five_minutes_stops_the_run(stub: StubLLMServer) -> None:
    stub.push(Reply(status=429, headers={"retry-after": "3600"}))
    with pytest.raises(LLMError) as info:
        client(stub, "openai").complete("s", "q")
    assert info.value.permanent and "wait 3600 s" in info.value.message and len(stub.requests) == 1


def test_retry_after_parses_each_form() -> None:
    now = 1_000_000.0
    assert retry_after({"retry-after-ms": "250"}) == 0.25
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after": email.utils.formatdate(now + 20, usegmt=True)}, now=now) == 20.0
    assert retry_after({"retry-after": "soon"}) is None and retry_after({}) is None


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_programming_error_in_the_sdk_call_is_a_crash_not_a_retry(stub: StubLLMServer, provider: str) -> None:
    """A TypeError from the real SDK (an argument it does not take) propagates at once: the engine records
    it as a crash of the team. The broad `except Exception` that retried it is gone."""
    llm = client(stub, provider)
    sdk = llm.provider.client

    def send(settings: Any, system: str, messages: Any, on_text: Any) -> Any:
        api = sdk.messages if provider == "anthropic" else sdk.chat.completions
        return api.create(model=settings.model, messages=messages, max_tokens=5, not_an_argument=True)

    llm.provider.send = send  # type: ignore[method-assign]
    with pytest.raises(TypeError, match="not_an_argument"):
        llm.complete("s", "q")
    assert not stub.requests


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_transient_failures_are_retried_once_per_loop_not_multiplied(stub: StubLLMServer, provider: str) -> None:
    """max_retries=3 means 4 requests in all: the SDK's own retries are off."""
    stub.push(*[Reply(status=529 if provider == "anthropic" else 500)] * 5)
    with pytest.raises(LLMError) as info:
        client(stub, provider).complete("s", "q")
    assert not info.value.permanent and "gave up after 3 retries" in info.value.message
    assert len(stub.requests) == 4
