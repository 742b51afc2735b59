"""A server that refuses to stream a model (OpenAI's 400 "Your organization must be verified to stream
this model", a gateway without streaming) gets the same call again without streaming; the run's later calls to that
model are not streamed, the records say so, and the run says it once. `--no-stream` and `--timeout` reach the SDKs."""

from __future__ import annotations

import pytest

from search.cli import build_parser
from search.engine.loop import run as run_loop
from search.inline import team_options
from search.llm import LLMClient, LLMError, load_prices, role_settings
from search.llm.streaming import StreamMemory, notices
from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import REFUSED_STREAM, Reply, StubLLMServer
from tests.llm.teams_support import options, quick_engine

KEY = "sk-test-0123456789abcdef"


def client(stub: StubLLMServer, provider: str, memory: StreamMemory | None = None, **extra: object) -> LLMClient:
    opts = {"provider": provider, "base_url": stub.url, "api_key": KEY, "model": "m", "retry_base_s": 0.01, **extra}
    return LLMClient(role_settings(opts, "plan"), prices=load_prices({}), streams=memory)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_refused_stream_is_sent_again_without_streaming(provider: str) -> None:
    with StubLLMServer(refuse_stream=True) as stub:
        memory = StreamMemory()
        shown: list[str] = []
        text, record = client(stub, provider, memory).complete("s", "q", on_text=shown.append)
        assert text == "ok" and [r.body.get("stream") for r in stub.requests] == [True, None]
        assert record.stream_requested and not record.streamed and record.retries == 0
        assert "refused to stream m" in record.stream_note and "--no-stream" in record.stream_note
        assert "re-sent without streaming" in "".join(shown)
        # Another role on the same model, later in the run: not streamed from the start, one request.
        _, later = client(stub, provider, memory).complete("s", "q2")
        assert len(stub.requests) == 3 and stub.requests[-1].body.get("stream") is None
        assert "refused to stream earlier in this run" in later.stream_note
        lines = notices([{"calls": [record.to_dict(), later.to_dict()]}])
        assert len(lines) == 1 and lines[0].startswith("Streaming: m was not streamed (2 call(s))")


def test_a_refusal_without_streaming_is_an_error_not_a_loop() -> None:
    """A 400 naming streaming on a call that did not stream cannot be helped by re-sending: it is permanent."""
    with StubLLMServer() as stub:
        stub.push(Reply(status=400, error_message=REFUSED_STREAM["openai"], error_param="stream"))
        with pytest.raises(LLMError) as caught:
            client(stub, "openai", stream=False).complete("s", "q")
        assert caught.value.permanent and len(stub.requests) == 1


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_run_whose_model_refuses_to_stream_finishes_non_streamed(provider: str) -> None:
    with StubLLMServer(kernel_responder,
                       refuse_stream=True) as stub:
        engine = quick_engine("stark", options(stub, provider), budget=2)
        summary = run_loop(engine)
        attempts = [n for n in engine.tree if n.parent is not None]
        assert summary.status == "finished" and [n.verdict for n in attempts] == ["pass", "pass"]
        streamed = [r.body.get("stream") for r in stub.requests]
        assert streamed[:2] == [True, None] and streamed[2:] == [None] * (len(streamed) - 2)
        assert len(notices(n.usage for n in engine.tree)) == 1


def test_no_stream_and_timeout_flags_reach_the_role_settings() -> None:
    args = build_parser().parse_args(["run", "p.py", "--team", "stark", "--provider", "openai", "--no-stream",
                                      "--timeout", "90"])
    opts = team_options(args)
    assert opts["stream"] is False and opts["timeout_s"] == 90.0
    settings = role_settings({**opts, "api_key": KEY}, "code", {})
    assert settings.stream is False and settings.timeout_s == 90.0
    default = team_options(build_parser().parse_args(["run", "p.py", "--team", "stark"]))
    assert "stream" not in default and "timeout_s" not in default
