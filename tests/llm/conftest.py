"""Fixtures for the LLM tests: a stub vendor server (both APIs) answering like a STARK model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer


@pytest.fixture
def stub() -> Iterator[StubLLMServer]:
    with StubLLMServer(kernel_responder) as server:
        yield server


@pytest.fixture(autouse=True)
def no_vendor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never see the developer's real keys, endpoints or price overrides."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "ANTHROPIC_PROFILE",
                 "OPENAI_API_KEY", "OPENAI_BASE_URL", "STARK_LLM_API_KEY", "STARK_LLM_BASE_URL",
                 "STARK_PRICES_JSON"):
        monkeypatch.delenv(name, raising=False)
