"""What an LLM run says at its start (team setting `notices`: printed by the CLI before the first attempt, logged,
and kept in the tree's team settings): the price each hosted model is charged at when it is not a known price
(assumed, the dearest of its family), and the roles whose temperature the chosen model will not take, with what
the run does instead."""

from __future__ import annotations

import logging

from search.llm import ConfigError, RoleSettings
from search.llm.client import HOSTED
from search.llm.pricing import Price, assumed_price, price_for
from search.llm.settings import OPENAI_REASONING_MODEL

log = logging.getLogger(__name__)

OPENAI_DEFAULT_TEMPERATURE = 1.0  # the only temperature OpenAI's reasoning models take


def price_notices(role_set: dict[str, RoleSettings], prices: dict[str, Price], limit: float | None,
                  limit_source: str) -> list[str]:
    """Price every hosted model of the run: known prices stay; a model nothing prices gets its family's dearest
    rates (added to `prices`, said in a notice); one with no known family is warned about, and a cost limit then
    cannot be enforced (ConfigError naming the fix)."""
    notices: list[str] = []
    unpriced: list[str] = []
    for provider, model in sorted({(s.provider, s.model) for s in role_set.values() if s.provider in HOSTED}):
        if price_for(model, prices, provider) is not None:
            continue
        assumed = assumed_price(model, prices, provider)
        if assumed is None:
            unpriced.append(model)
            log.warning("NO PRICE for %s model %r: its calls count as $0 in usage and cost limits; give its price "
                        "with --price %s=INPUT,OUTPUT (USD per million tokens)", provider, model, model)
            continue
        prices[model] = assumed
        notices.append(f"Price: {model} is not in the price data; it is charged at {assumed.describe()}, "
                       f"{assumed.source}. Give the real price with --price {model}=INPUT,OUTPUT")
    if unpriced and limit is not None:
        raise ConfigError(f"{limit_source} ${limit:g} cannot be enforced: no price is known for "
                          f"{', '.join(unpriced)} nor for any model of its family; give it with --price "
                          f"{unpriced[0]}=INPUT,OUTPUT (USD per million tokens) or STARK_PRICES_JSON")
    return notices


def temperature_notices(role_set: dict[str, RoleSettings]) -> list[str]:
    """One line per model whose roles will run without the temperature they ask for: a reasoning effort takes
    none; OpenAI's reasoning models (o-series, gpt-5 and later, not -chat) take only their default."""
    by_model: dict[tuple[str, str], list[RoleSettings]] = {}
    lines: list[str] = []
    for s in role_set.values():
        if s.temperature is None:
            continue
        if s.reasoning_effort:
            lines.append(f"Temperature: {s.role} asks for reasoning effort {s.reasoning_effort}, which takes no "
                         f"temperature: it runs without its {s.temperature:g} (at the model's default)")
        elif (s.provider == "openai" and s.base_url is None and OPENAI_REASONING_MODEL.match(s.model)
              and s.temperature != OPENAI_DEFAULT_TEMPERATURE):
            by_model.setdefault((s.provider, s.model), []).append(s)
    for (_, model), roles in by_model.items():
        asked = ", ".join(f"{s.role} {s.temperature:g}" for s in roles)
        lines.append(f"Temperature: {model} is an OpenAI reasoning model, which takes only its default temperature "
                     f"({OPENAI_DEFAULT_TEMPERATURE:g}), so {asked} will be refused: each role's first call is sent "
                     f"again without a temperature and its later calls leave it out (the model samples at "
                     f"{OPENAI_DEFAULT_TEMPERATURE:g}, and the roles no longer differ in temperature). To keep the "
                     "paper's temperatures choose a model that takes them (e.g. --model gpt-4.1); "
                     "--strict-temperatures stops the run instead")
    return lines
