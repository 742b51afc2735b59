"""Fixtures for the LLM tests: a stub vendor server (both APIs) answering like a STARK model."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.tree import Tree
from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer
from tests.llm.teams_support import BROKEN, PROBLEM, SECRET, evaluate


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


@pytest.fixture(scope="session")
def results() -> dict[str, dict[str, Any]]:
    """Real evaluations: the reference passes; a candidate that raises in forward fails, and never
    sees the vendor keys the search process holds."""
    tree = Tree(PROBLEM, root_source=reference_candidate(PROBLEM))
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
