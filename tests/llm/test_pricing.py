"""Prices: the maintained source (genai-prices' bundled data) for both vendors, the dated table as its fallback with a
tier-aware prefix match, overrides from STARK_PRICES_JSON (JSON or file) and --price, and a conservative assumed
price for a hosted model nothing prices."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from search.llm import (
    CallRecord,
    ConfigError,
    CostLimitReached,
    CostMeter,
    Price,
    estimate_cost,
    load_prices,
    price_for,
)


def test_it_matches_the_longest_prefix() -> None:
    table = load_prices({})
    assert price_for("claude-sonnet-4-20250514", table).input == 3.0
    assert price_for("claude-opus-4-5-20251101", table).output == 25.0
    assert price_for("claude-opus-4-1", table).output == 75.0
    assert price_for("claude-sonnet-4-6", table).output == 15.0
    assert price_for("gpt-4.1-mini-2025", table).input == 0.4
    assert price_for("llama3:70b", table) is None


@pytest.mark.parametrize("model,price", [
    # A family key used to price other tiers of the family.
    ("gpt-5-pro", (15.0, 120.0)), ("gpt-5-pro-2025-10-06", (15.0, 120.0)),
    ("gpt-5-nano", (0.05, 0.4)), ("gpt-5-nano-2025-08-07", (0.05, 0.4)),
    ("o3-mini", (1.1, 4.4)), ("o3-mini-2025-01-31", (1.1, 4.4)), ("o3-pro", (20.0, 80.0)),
    ("gpt-5", (1.25, 10.0)), ("gpt-5-2025-08-07", (1.25, 10.0)), ("gpt-5.1", (1.25, 10.0)),
    ("gpt-5-codex", (1.25, 10.0)), ("gpt-4o-mini-2024-07-18", (0.15, 0.6)),
    ("claude-haiku-4-5-20251001", (1.0, 5.0)), ("claude-3-5-haiku-latest", (0.8, 4.0)),
])
def test_a_key_prices_dated_and_versioned_names_but_never_another_tier(model: str, price: tuple) -> None:
    found = price_for(model, load_prices({}))
    assert found is not None and (found.input, found.output) == price


@pytest.mark.parametrize("model", ["gpt-5-codex-mini", "gpt-4o-realtime-preview", "o3-deep-research", "o30",
                                   "gpt-4o-audio-preview"])
def test_another_tier_or_product_is_unknown_not_mispriced(model: str) -> None:
    # The dated table alone (a compatible server's lookup): no row prices another tier of its model.
    assert price_for(model, load_prices({}), "openai-compatible") is None


def test_the_table_is_dated_data() -> None:
    from search.llm.price_table import AS_OF, ROWS, SOURCES

    assert AS_OF[:4].isdigit() and SOURCES and all(len(row) == 4 for row in ROWS.values())


def test_the_price_option_names_models_or_the_whole_run() -> None:
    from search.llm.pricing import parse_price_option

    prices = parse_price_option(["my-model=1,2", "other=3,4,0.3,3.75"], ["ignored"])
    assert prices["my-model"] == Price(1.0, 2.0) and prices["other"] == Price(3.0, 4.0, 0.3, 3.75)
    assert set(parse_price_option("0.5,1.5", ["a", "b"])) == {"a", "b"}
    for bad in ("cheap", "m=1", "m=1,x", "m=-1,2", "1,2,3,4,5"):
        with pytest.raises(ConfigError, match="--price"):
            parse_price_option(bad, ["m"])


def test_cost_counts_fresh_cached_and_written_tokens() -> None:
    price = load_prices({})["claude-sonnet-4-6"]
    cost = estimate_cost(price, input_tokens=10_000, output_tokens=1_000, cache_read_tokens=6_000,
                         cache_write_tokens=2_000)
    assert cost == pytest.approx((2_000 * 3 + 6_000 * 0.3 + 2_000 * 3.75 + 1_000 * 15) / 1e6)
    assert estimate_cost(None, 10**6, 10**6) == 0.0


def test_the_environment_overrides_and_extends_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STARK_PRICES_JSON", json.dumps({"gpt-4.1": {"input": 1, "output": 2},
                                                        "my-local": {"input": 0.1, "output": 0.2}}))
    table = load_prices()
    assert table["gpt-4.1"].input == 1.0 and table["gpt-4.1"].cache_read is None
    assert price_for("my-local-7b", table).output == 0.2
    assert table["claude-sonnet-4-6"].input == 3.0  # the rest of the defaults stay
    assert price_for("gpt-4.1", table, "openai").input == 1.0  # an override beats the maintained source


def test_the_override_may_be_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"m": {"input": 5, "output": 6, "cache_read": 0.5}}))
    monkeypatch.setenv("STARK_PRICES_JSON", str(path))
    assert load_prices()["m"].cache_read == 0.5


@pytest.mark.parametrize("bad,words", [
    ("{not json", "not valid JSON"),
    ("/no/such/prices.json", "neither a JSON object nor a readable file"),
    ('{"m": {"input": 1}}', "'input' and 'output'"),
    ('{"m": {"input": "cheap", "output": 1}}', "must be numbers"),
])
def test_a_bad_override_names_the_problem(monkeypatch: pytest.MonkeyPatch, bad: str, words: str) -> None:
    monkeypatch.setenv("STARK_PRICES_JSON", bad)
    with pytest.raises(ConfigError, match="STARK_PRICES_JSON") as info:
        load_prices()
    assert words in str(info.value)


def test_the_meter_holds_worst_cases_in_flight_and_waits_for_them() -> None:
    """A call that fits only once calls in flight settle waits for them; one that cannot fit is refused."""
    meter = CostMeter(1.0)
    first = meter.reserve(0.6)
    started = threading.Event()

    def second() -> None:
        meter.settle(meter.reserve(0.6), None)
        started.set()

    thread = threading.Thread(target=second, daemon=True)
    thread.start()
    assert not started.wait(0.2)  # 0.6 held + 0.6 > 1.0: it waits
    meter.settle(first, CallRecord("plan", "anthropic", "m", None, None, cost_usd=0.3))
    assert started.wait(5) and meter.spent_usd == 0.3 and meter.reserved_usd == 0.0
    with pytest.raises(CostLimitReached, match=r"could cost up to \$0.8000.*raise --cost-limit"):
        meter.reserve(0.8)  # 0.3 spent + 0.8 > 1.0 even with nothing in flight
    assert meter.summary()["calls"] == 1


def test_the_maintained_source_prices_current_models_of_both_vendors_offline() -> None:
    from search.llm.maintained_prices import maintained_price, source

    assert source() is not None and "bundled data" in (source() or "")
    table = load_prices({})
    gpt = price_for("gpt-5.5", table, "openai")  # no longer the gpt-5 row's $1.25 / $10
    assert gpt is not None and (gpt.input, gpt.output) == (5.0, 30.0) and "genai-prices" in gpt.source
    sonnet = price_for("claude-sonnet-5-5-20270101", table, "anthropic")  # a dated name of a listed model
    assert sonnet is not None and (sonnet.input, sonnet.output, sonnet.cache_read) == (2.0, 10.0, 0.1)
    assert maintained_price("openai-compatible", "gpt-5.5") is None  # a local server's model is not the vendor's


def test_the_dated_table_agrees_with_the_maintained_source_where_both_price() -> None:
    from search.llm.maintained_prices import maintained_price
    from search.llm.pricing import DEFAULT_PRICES, vendor

    differ = []
    for model, row in DEFAULT_PRICES.items():
        who = vendor(model, None)
        found = maintained_price(who, model) if who else None
        if found is not None and (found.input, found.output) != (row.input, row.output):
            differ.append(f"{model}: table {row.describe()}, maintained {found.describe()}")
    assert differ == [], "update search/llm/price_table.py (and AS_OF): " + "; ".join(differ)


@pytest.mark.parametrize("provider, model, dearest", [
    ("anthropic", "claude-sonnet-9", (3.0, 15.0)),  # the Sonnets' highest rates, not the newest one's $2 / $10
    ("anthropic", "claude-opus-9-1", (15.0, 75.0)),
    ("openai", "gpt-9-sol", (4.0, 20.0)),
])
def test_an_unknown_hosted_model_is_charged_its_familys_highest_rates(provider: str, model: str,
                                                                      dearest: tuple) -> None:
    from search.llm.pricing import assumed_price, charged_price

    table = load_prices({})
    assert price_for(model, table, provider) is None
    assumed = assumed_price(model, table, provider)
    assert assumed is not None and assumed.assumed and (assumed.input, assumed.output) == dearest
    assert "assumed: the highest rates of the" in assumed.source
    assert charged_price(model, table, provider) == assumed
    assert charged_price("qwen2.5-coder:32b", table, "openai-compatible") is None  # a local model costs 0
