"""LLM providers (Anthropic, OpenAI, OpenAI-compatible) through the official SDKs, with retries,
usage, pricing and per-call records. Pure: no Django."""

from __future__ import annotations

from search.llm.client import LLMClient
from search.llm.errors import ConfigError, CostLimitReached, LLMError
from search.llm.pricing import PRICES_ENV, Price, estimate_cost, load_prices, price_for
from search.llm.records import CallRecord, Completion, CostMeter
from search.llm.settings import PROVIDERS, ROLES, RoleSettings, public_options, redact, role_settings

__all__ = [
    "PRICES_ENV", "PROVIDERS", "ROLES", "CallRecord", "Completion", "ConfigError", "CostLimitReached",
    "CostMeter", "LLMClient", "LLMError", "Price", "RoleSettings", "estimate_cost", "load_prices",
    "price_for", "public_options", "redact", "role_settings",
]
