"""Prices (USD per million tokens) and the cost estimate of one call.

Where a price comes from, first to last (price_for):
1. an override: the environment variable STARK_PRICES_JSON, holding either a JSON object or the path of a JSON
   file, e.g. `{"my-model": {"input": 0.5, "output": 1.5, "cache_read": 0.05}}`, or per run `--price
   MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]`;
2. the maintained source, for Anthropic and OpenAI models: the genai-prices package's bundled data
   (search.llm.maintained_prices; never fetched from the network);
3. the dated table, search/llm/price_table.py (list prices, dated AS_OF), the fallback without the package.
A key prices its model and that model's dated or versioned names, never another tier of it (see price_key).
A hosted model none of them prices is priced conservatively by the LLM teams: the most expensive known price of
its family (assumed_price), said at the start of the run and in every call record (`price_assumed`). A local
server's unknown model costs 0 and is marked `price_known: false`.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from search.llm.errors import ConfigError
from search.llm.price import Price
from search.llm.price_table import AS_OF, ROWS

PRICES_ENV = "STARK_PRICES_JSON"
# The cost limits a run of an LLM team gets when none is given: per run (one problem), and per suite (bench).
DEFAULT_COST_LIMIT_USD = 25.0
DEFAULT_SUITE_COST_LIMIT_USD = 200.0


TABLE_SOURCE = f"price table of {AS_OF}"
OVERRIDES = (PRICES_ENV, "--price")  # the sources that beat the maintained prices
DEFAULT_PRICES: dict[str, Price] = {model: Price(*row, source=TABLE_SOURCE) for model, row in ROWS.items()}
# Words that name another tier or product of a model: a key never prices a longer name that adds one.
TIER_WORDS = {"mini", "nano", "pro", "max", "turbo", "lite", "flash", "micro", "small", "medium", "large",
              "realtime", "audio", "search", "transcribe", "tts", "image", "vision", "deep", "research",
              "opus", "sonnet", "haiku", "fable", "mythos", "instruct", "embedding", "sol", "terra", "luna", "astra",
              "cyber"}
_WORD = re.compile(r"[a-z]+")

def _parse_price(model: str, value: Any) -> Price:
    if not isinstance(value, dict) or "input" not in value or "output" not in value:
        raise ConfigError(f"{PRICES_ENV}: price for {model!r} must be an object with 'input' and 'output' "
                          "(USD per million tokens), optionally 'cache_read' and 'cache_write'")
    try:
        return Price(float(value["input"]), float(value["output"]),
                     None if value.get("cache_read") is None else float(value["cache_read"]),
                     None if value.get("cache_write") is None else float(value["cache_write"]), source=PRICES_ENV)
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


def vendor(model: str, provider: str | None) -> str | None:
    """The vendor whose maintained prices apply: the provider when it is one (anthropic, openai), else None (a
    local or compatible server). Without a provider (a bare lookup) the model's name says it."""
    if provider is None:
        return "anthropic" if model.lower().startswith("claude") else "openai"
    return provider if provider in ("anthropic", "openai") else None


def price_for(model: str, table: dict[str, Price], provider: str | None = None) -> Price | None:
    """The price of `model` (at `provider`): an override, else the maintained source, else the dated table (see
    the module's docstring); None when none prices it."""
    from search.llm.maintained_prices import maintained_price

    key = price_key(model, table)
    if key is not None and (table[key].source in OVERRIDES or table[key].assumed):
        return table[key]
    who = vendor(model, provider)
    found = maintained_price(who, model) if who else None
    if found is not None:
        return found
    return None if key is None else table[key]


def charged_price(model: str, table: dict[str, Price], provider: str) -> Price | None:
    """What a call is charged at: its known price, else for a hosted vendor (anthropic, openai) the assumed one;
    None for a local server's unknown model (it costs 0)."""
    known = price_for(model, table, provider)
    if known is not None or vendor(model, provider) is None:
        return known
    return assumed_price(model, table, provider)


def assumed_price(model: str, table: dict[str, Price], provider: str) -> Price | None:
    """A conservative price for a hosted model nothing prices: each rate the highest among the known models nearest
    to its family (the same name words: `claude-sonnet-9` -> the Sonnets; else the same first word: `gpt-7` -> every
    gpt model; else every model of the vendor) in the maintained source and the dated table; None when neither
    knows a model of the vendor."""
    from search.llm.maintained_prices import LEVELS, family, family_prices, same_family

    words = family(model)
    level, found = family_prices(provider, model)
    known = list(found)
    for at in range(len(LEVELS)):
        rows = [(k, p) for k, p in table.items() if not p.assumed and p.source == TABLE_SOURCE
                and vendor(k, None) == provider and same_family(family(k), words, at)]
        if rows and at <= level:
            known = (known if at == level else []) + rows
            level = at
            break
    if not known:
        return None

    def most(name: str) -> float | None:
        values = [getattr(p, name) for _, p in known if getattr(p, name) is not None]
        return max(values) if values else None

    dearest = max(known, key=lambda kp: (kp[1].output, kp[1].input))[0]
    what = {0: f"the {'-'.join(words)} family", 1: f"the {words[0] if words else model} models"}.get(
        level, f"the {provider} models")
    return Price(max(p.input for _, p in known), max(p.output for _, p in known), most("cache_read"),
                 most("cache_write"), assumed=True,
                 source=f"assumed: the highest rates of {what} ({len(known)} known model(s), the dearest {dearest})")


def parse_price_option(values: str | list[str] | tuple[str, ...], models: list[str]) -> dict[str, Price]:
    """`--price MODEL=INPUT,OUTPUT[,CACHE_READ[,CACHE_WRITE]]` (USD per million tokens), repeatable; without
    `MODEL=` the price is that of every model of the run (`models`). Raises ConfigError naming the fix."""
    out: dict[str, Price] = {}
    for value in [values] if isinstance(values, str) else list(values):
        model, sep, numbers = str(value).rpartition("=")
        parts = [p.strip() for p in numbers.split(",")]
        try:
            rates = [float(p) for p in parts] + [None] * (4 - len(parts))
            price = Price(rates[0], rates[1], rates[2], rates[3], source="--price") \
                if 2 <= len(parts) <= 4 and rates[0] is not None and rates[1] is not None else None
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
