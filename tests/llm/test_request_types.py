"""Every request body we send is checked against the installed SDKs' own request types
(anthropic MessageCreateParams, openai chat CompletionCreateParams): each field is one of theirs, except those
docs/llm.md lists and justifies (OUTSIDE)."""

from __future__ import annotations

import pytest
from anthropic.types import message_create_params
from openai.types.chat import completion_create_params

from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer
from tests.llm.teams_support import options, quick_engine

# Sent outside the SDK's types, and why (docs/llm.md, "Before your first real run"): the 2.x anthropic SDK has no
# `temperature` parameter, while the Messages API still takes it (the paper's per-role temperatures).
OUTSIDE = {"anthropic": {"temperature"}, "openai": set()}
TYPES = {"anthropic": message_create_params.MessageCreateParamsBase, "openai": completion_create_params.CompletionCreateParamsBase}


def fields(typed: type) -> set[str]:
    keys: set[str] = set()
    for cls in typed.__mro__:
        keys |= set(getattr(cls, "__annotations__", {}))
    return keys | {"stream"}  # the streaming variants add `stream`


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("extra", [{}, {"stream": False}, {"reasoning_effort": "high", "model": "claude-sonnet-4-6"},
                                   {"reasoning_effort": "low", "model": "claude-sonnet-4-5"}])
def test_request_bodies_are_the_sdks_request_types(provider: str, extra: dict) -> None:
    with StubLLMServer(kernel_responder) as stub:
        engine = quick_engine("stark", {**options(stub, provider), **extra})
        engine.expand(0)
        allowed = fields(TYPES[provider]) | OUTSIDE[provider]
        for request in stub.requests:
            assert set(request.body) <= allowed, sorted(set(request.body) - allowed)
        sent = set().union(*(r.body for r in stub.requests))
        assert OUTSIDE[provider] <= sent or "reasoning_effort" in extra  # each listed exception is really sent
