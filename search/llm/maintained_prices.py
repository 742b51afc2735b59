"""Prices from a maintained source: the `genai-prices` package (pydantic's table of LLM API prices), read only from
the data bundled with the installed version, never from the network (its `UpdatePrices` is never started), so a
price does not change under a running cost limit and GPU hosts without internet price the same.

It covers both vendors (Anthropic and OpenAI, every current model the installed SDKs list) and their dated and
aliased names (its own match rules). A tiered price (a dearer rate above a long prompt's threshold) counts at its
base rate: STARK's prompts stay far below those thresholds. Without the package (Python 3.10, or not installed)
every lookup answers None and the dated table (search.llm.price_table) prices alone.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from typing import Any

from search.llm.price import Price

VENDORS = ("anthropic", "openai")  # the providers whose prices the package has; openai-compatible servers are not
_WORD = re.compile(r"[a-z]+")


@functools.cache
def source() -> str | None:
    """"genai-prices X.Y.Z (bundled data)", or None when the package is not importable."""
    try:
        from importlib.metadata import version

        import genai_prices  # noqa: F401
    except ImportError:
        return None
    return f"genai-prices {version('genai_prices')} (bundled data)"


@functools.cache
def _models(provider: str) -> tuple[Any, ...]:
    if provider not in VENDORS or source() is None:
        return ()
    from genai_prices import data_snapshot

    for p in data_snapshot.get_snapshot().providers:
        if p.id == provider:
            return tuple(p.models)
    return ()


def _number(value: Any) -> float | None:
    if value is None:
        return None
    return float(getattr(value, "base", value))  # a TieredPrices counts at its base rate


def _price(info: Any, note: str) -> Price | None:
    prices = info.get_prices(dt.datetime.now(dt.timezone.utc))
    inp, out = _number(getattr(prices, "input_mtok", None)), _number(getattr(prices, "output_mtok", None))
    if inp is None or out is None:
        return None
    return Price(inp, out, _number(getattr(prices, "cache_read_mtok", None)),
                 _number(getattr(prices, "cache_write_mtok", None)), source=note)


@functools.cache
def maintained_price(provider: str, model: str) -> Price | None:
    """The bundled price of `model` at `provider` (anthropic, openai), or None when the package lacks it."""
    for info in _models(provider):
        if info.is_match(model):
            return _price(info, f"{source()}: {info.id}")
    return None


def family(model: str) -> tuple[str, ...]:
    """A model's family: the words of its name without numbers (`claude-sonnet-9` -> claude, sonnet)."""
    return tuple(_WORD.findall(model.lower()))


def same_family(theirs: tuple[str, ...], words: tuple[str, ...], level: int) -> bool:
    """Level 0: the same name words; 1: the same first word; 2: any model of the vendor."""
    return theirs == words if level == 0 else bool(words) and theirs[:1] == words[:1] if level == 1 else True


LEVELS = ("family", "first word", "vendor")


@functools.cache
def family_prices(provider: str, model: str) -> tuple[int, tuple[tuple[str, Price], ...]]:
    """The level (LEVELS) and (name, price) of the maintained models nearest to `model`'s family at `provider`: the
    same name words, else the same first word (`gpt-7` -> every gpt model), else every model of the vendor;
    deprecated ones left out."""
    words = family(model)
    for level in range(len(LEVELS)):
        out: list[tuple[str, Price]] = []
        for info in _models(provider):
            if not info.deprecated and same_family(family(info.id), words, level):
                price = _price(info, "")
                if price is not None:
                    out.append((info.id, price))
        if out:
            return level, tuple(out)
    return len(LEVELS), ()
