"""Prices (USD per million tokens) and the cost estimate of one call.

The defaults are search/llm/price_table.py (list prices, dated AS_OF). Override or extend them with the
environment variable STARK_PRICES_JSON, holding either a JSON object or the path of a JSON file, e.g.
`{"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05}}`, or per run with `--price
MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]`. A key prices its model and that model's dated or
versioned names, never another tier of it (see price_key). Unknown models cost 0 and are marked
`price_known: false` in the call record (right for a local server; the LLM teams warn about hosted ones,
and refuse a cost limit they cannot enforce).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from search.llm.errors import ConfigError
from search.llm.price_table import ROWS

PRICES_ENV = "STARK_PRICES_JSON"


@dataclass(frozen=True)
class Price:
    """USD per million tokens; cache reads/writes default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None


DEFAULT_PRICES: dict[str, Price] = {model: Price(*row) for model, row in ROWS.items()}
# Words that name another tier or product of a model: a key never prices a longer name that adds one.
TIER_WORDS = {"mini", "nano", "pro", "max", "turbo", "lite", "flash", "micro", "small", "medium", "large",
              "realtime", "audio", "search", "transcribe", "tts", "image", "vision", "deep", "research",
              "opus", "sonnet", "haiku", "instruct", "embedding"}
_WORD = re.compile(r"[a-z]+")

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


def price_key(model: str, table: dict[str, Price]) -> str | None:
    """The table key that prices `model`: the model itself, else the longest key it extends by a date or
    version (`-20250514`, `-2025-08-07`, `.1`, `-latest`, `-codex`) but not by another tier word."""
    if model in table:
        return model
    lowered = model.lower()
    best: str | None = None
    for key in table:
        k = key.lower()
        if not lowered.startswith(k) or len(lowered) == len(k) or lowered[len(k)] not in "-._:@/":
            continue
        if TIER_WORDS & set(_WORD.findall(lowered[len(k):])):
            continue
        if best is None or len(key) > len(best):
            best = key
    return best


def price_for(model: str, table: dict[str, Price]) -> Price | None:
    key = price_key(model, table)
    return None if key is None else table[key]


def parse_price_option(values: str | list[str] | tuple[str, ...], models: list[str]) -> dict[str, Price]:
    """`--price MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]` (USD per million tokens), repeatable; without
    `MODEL=` the price is that of every model of the run (`models`). Raises ConfigError naming the fix."""
    out: dict[str, Price] = {}
    for value in [values] if isinstance(values, str) else list(values):
        model, sep, numbers = str(value).rpartition("=")
        parts = [p.strip() for p in numbers.split(",")]
        try:
            price = Price(*(float(p) for p in parts)) if 2 <= len(parts) <= 4 else None
        except ValueError:
            price = None
        if price is None or min(x for x in (price.input, price.output, price.cache_read, price.cache_write)
                                if x is not None) < 0:
            raise ConfigError(f"--price {value!r}: expected [MODEL=]INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]] in USD "
                              "per million tokens, e.g. --price claude-sonnet-4-6=3,15,0.3,3.75")
        for name in [model.strip()] if sep else models:
            out[name] = price
    return out


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
