"""Price table (USD per million tokens) and the cost estimate of one call.

Defaults are list prices at the time of writing. Override or extend them with the
environment variable STARK_PRICES_JSON, holding either a JSON object or the path of a JSON
file, e.g. `{"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05}}`; keys are model
names or name prefixes (the longest matching prefix wins). Unknown models cost 0 and are
marked `price_known: false` in the call record (right for a local server).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search.llm.errors import ConfigError

PRICES_ENV = "STARK_PRICES_JSON"


@dataclass(frozen=True)
class Price:
    """USD per million tokens; cache reads/writes default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


# Generic family prefixes ("claude-sonnet", "gpt-5") price newer models at their family's list
# price: an estimate until the table (or STARK_PRICES_JSON) names them.
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus": Price(5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-2": Price(15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-0": Price(15.0, 75.0, 1.5, 18.75),
    "claude-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-haiku": Price(1.0, 5.0, 0.1, 1.25),
    "claude-3-7-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": Price(3.0, 15.0, 0.3, 3.75),
    "claude-3-5-haiku": Price(0.8, 4.0, 0.08, 1.0),
    "gpt-5-mini": Price(0.25, 2.0, 0.025),
    "gpt-5": Price(1.25, 10.0, 0.125),
    "gpt-4.1-nano": Price(0.1, 0.4, 0.025),
    "gpt-4.1-mini": Price(0.4, 1.6, 0.1),
    "gpt-4.1": Price(2.0, 8.0, 0.5),
    "gpt-4o-mini": Price(0.15, 0.6, 0.075),
    "gpt-4o": Price(2.5, 10.0, 1.25),
    "o4-mini": Price(1.1, 4.4, 0.275),
    "o3": Price(2.0, 8.0, 0.5),
}


def _parse_price(model: str, value: Any) -> Price:
    if not isinstance(value, dict) or "input" not in value or "output" not in value:
        raise ConfigError(f"{PRICES_ENV}: price for {model!r} must be an object with 'input' and 'output' "
                          "(USD per million tokens), optionally 'cache_read' and 'cache_write'")
    try:
        return Price(float(value["input"]), float(value["output"]),
                     None if value.get("cache_read") is None else float(value["cache_read"]),
                     None if value.get("cache_write") is None else float(value["cache_write"]))
    except (TypeError, ValueError):
        raise ConfigError(f"{PRICES_ENV}: prices for {model!r} must be numbers, got {value!r}") from None


def load_prices(override: str | dict[str, Any] | None = None) -> dict[str, Price]:
    """The default table merged with an override (a dict, JSON text, or a JSON file path);
    without an argument the override comes from STARK_PRICES_JSON."""
    if override is None:
        override = os.environ.get(PRICES_ENV) or None
    table = dict(DEFAULT_PRICES)
    if override is None:
        return table
    if isinstance(override, str):
        text = override.strip()
        if not text.startswith("{"):
            path = Path(text).expanduser()
            if not path.is_file():
                raise ConfigError(f"{PRICES_ENV}={text!r} is neither a JSON object nor a readable file")
            text = path.read_text()
        try:
            override = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{PRICES_ENV} is not valid JSON ({exc}); expected "
                              '{"model": {"input": 3.0, "output": 15.0}}') from None
    if not isinstance(override, dict):
        raise ConfigError(f"{PRICES_ENV} must be a JSON object mapping model names to prices")
    for model, value in override.items():
        table[str(model)] = _parse_price(str(model), value)
    return table


def price_for(model: str, table: dict[str, Price]) -> Price | None:
    """Exact match first, then the longest key that prefixes the model name."""
    if model in table:
        return table[model]
    matches = [key for key in table if model.startswith(key)]
    return table[max(matches, key=len)] if matches else None


def estimate_cost(price: Price | None, input_tokens: int, output_tokens: int,
                  cache_read_tokens: int = 0, cache_write_tokens: int = 0) -> float:
    """Cost in USD; `input_tokens` counts the whole prompt, cached parts included."""
    if price is None:
        return 0.0
    fresh = max(0, input_tokens - cache_read_tokens - cache_write_tokens)
    read = price.input if price.cache_read is None else price.cache_read
    write = price.input if price.cache_write is None else price.cache_write
    total = fresh * price.input + cache_read_tokens * read + cache_write_tokens * write + output_tokens * price.output
    return round(total / 1_000_000, 8)
