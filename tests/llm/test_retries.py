"""Failures: 429-then-success, 5xx, timeouts, unreadable answers are retried with backoff;
401/403/404 stop at once with a message naming the fix; temperature rejections are re-sent without it."""

from __future__ import annotations

import itertools

import pytest

from search.llm import LLMClient, LLMError, load_prices, role_settings
from tests.llm.stub_server import Reply, StubLLMServer

KEY = "sk-test-0123456789abcdef"
_models = itertools.count()


class Sleeps(list):
    """Records the backoff delays instead of waiting them out."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(stub: StubLLMServer, provider: str = "anthropic", sleeps: Sleeps | None = None,
           **extra: object) -> LLMClient:
    options = {"provider": provider, "base_url": stub.url, "api_key": KEY, "model": f"m-{next(_models)}",
               "retry_base_s": 1.0, "max_retries": 3, **extra}
    return LLMClient(role_settings(options, "plan"), prices=load_prices({}), sleep=Sleeps() if sleeps is None else sleeps)


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_it_retries_429_then_succeeds_honouring_retry_after(stub: StubLLMServer, provider: str) -> None:
    sleeps = Sleeps()
    stub.push(Reply(status=429, headers={"retry-after": "7"}), Reply(status=429), Reply("done"))
    text, record = client(stub, provider, sleeps).complete("s", "q")
    assert text == "done"
    assert record.retries == 2 and len(stub.requests) == 3
    assert sleeps[0] == 7.0               # the server's Retry-After wins over a shorter backoff
    assert 1.5 <= sleeps[1] <= 2.5        # exponential: base 1 s * 2 ** 1, with jitter
    retry_notes = [note for note in record.notes if note.startswith("retry")]
    assert len(retry_notes) == 2 and all("429" in note for note in retry_notes)


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_it_gives_up_on_5xx_after_max_retries(stub: StubLLMServer, provider: str) -> None:
    stub.push(*[Reply(status=500)] * 4, Reply("never reached"))
    with pytest.raises(LLMError) as info:
        client(stub, provider).complete("s", "q")
    assert not info.value.permanent and info.value.status == 500
    assert "gave up after 3 retries" in info.value.message
    assert len(stub.requests) == 4


@pytest.mark.parametrize("provider,env", [("anthropic", "ANTHROPIC_API_KEY"), ("openai", "OPENAI_API_KEY"),
                                          ("openai-compatible", "STARK_LLM_API_KEY")])
def test_a_bad_key_stops_at_once_and_names_the_fix(stub: StubLLMServer, provider: str, env: str) -> None:
    stub.push(Reply(status=401, error_message="invalid x-api-key"))
    with pytest.raises(LLMError) as info:
        client(stub, provider).complete("s", "q")
    assert info.value.permanent and info.value.status == 401
    assert env in info.value.message and "invalid x-api-key" in info.value.message
    assert KEY not in info.value.message
    assert len(stub.requests) == 1


@pytest.mark.parametrize("status,words", [(404, "check --model"), (403, "permissions"), (400, "refused")])
def test_client_errors_are_permanent(stub: StubLLMServer, status: int, words: str) -> None:
    stub.push(Reply(status=status, error_message="nope"))
    with pytest.raises(LLMError) as info:
        client(stub, "openai-compatible").complete("s", "q")
    assert info.value.permanent and words in info.value.message
    assert len(stub.requests) == 1


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_timeout_is_retried(stub: StubLLMServer, provider: str) -> None:
    stub.push(Reply("too late", delay_s=2.0), Reply("in time"))
    text, record = client(stub, provider, timeout_s=0.5).complete("s", "q")
    assert text == "in time" and record.retries == 1
    assert "did not answer within 0.5s" in record.notes[0]


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_unreadable_answer_is_retried(stub: StubLLMServer, provider: str, stream: bool) -> None:
    stub.push(Reply(raw_body=b"<html>bad gateway</html>"), Reply("fine"))
    text, record = client(stub, provider, stream=stream).complete("s", "q")
    assert text == "fine" and record.retries == 1
    assert "unreadable answer" in record.notes[0]


def test_a_connection_refused_is_retried_then_reported() -> None:
    server = StubLLMServer().start()
    url = server.url
    server.stop()
    llm = LLMClient(role_settings({"provider": "openai-compatible", "base_url": url, "model": "m",
                                   "max_retries": 1, "retry_base_s": 0.01}, "plan"))
    with pytest.raises(LLMError) as info:
        llm.complete("s", "q")
    assert not info.value.permanent and "cannot reach" in info.value.message


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
def test_a_model_that_rejects_temperature_is_asked_again_without_it(stub: StubLLMServer, provider: str) -> None:
    llm = client(stub, provider)
    stub.push(Reply(status=400, error_message="temperature is not supported with this model"), Reply("ok"))
    text, record = llm.complete("s", "q")
    assert text == "ok"
    assert [r.temperature for r in stub.requests] == [0.8, None]
    assert "temperature" not in stub.requests[1].body
    assert record.temperature is None and record.temperature_requested == 0.8
    assert "rejected temperature 0.8" in record.notes[0]
    # Remembered for this role in this run (the client's own memory here): the next call leaves it out and says so.
    _, again = llm.complete("s", "q")
    assert "temperature" not in stub.requests[2].body and len(stub.requests) == 3
    assert "not sent" in again.notes[0]


def test_anthropic_temperature_travels_in_the_body(stub: StubLLMServer) -> None:
    """anthropic 1.x+ dropped the parameter; it must still reach the API for models that take it."""
    client(stub, "anthropic").complete("s", "q")
    assert stub.requests[-1].body["temperature"] == 0.8
