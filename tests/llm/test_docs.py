"""docs/llm.md stays honest: every team, provider, environment variable and option it should name."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from search.llm.pricing import PRICES_ENV
from search.llm.settings import BASE_URL_ENV, KEY_ENV, PROVIDERS
from search.teams.llm_teams import LLM_TEAM_NAMES

DOC = (Path(__file__).resolve().parents[2] / "docs" / "llm.md").read_text()


@pytest.mark.parametrize("name", [*LLM_TEAM_NAMES, *PROVIDERS, *KEY_ENV.values(), *BASE_URL_ENV.values(), PRICES_ENV,
                                  "api_key", "timeout_s", "max_retries", "stream", "prompt_caching",
                                  "--max-reasks", "--cost-limit", "--plan-temperature", "--base-url",
                                  "--strict-temperatures", "strict_temperatures", "temperature_dropped",
                                  "--no-stream", "--timeout", "reasoning_tokens", "max_tokens_sent", "stream_note",
                                  "model_warnings", "Before your first real run"])
def test_the_llm_doc_names_it(name: str) -> None:
    assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", DOC), f"docs/llm.md does not mention `{name}`"
