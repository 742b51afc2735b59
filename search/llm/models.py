"""Default models, from one dated table, and what the installed SDKs say about a chosen model's retirement.

DEFAULTS is the only place a default model is named (settings, the providers page and the docs read it): the newest
model each vendor's SDK listed on AS_OF, with no announced shutdown date, in the tier the paper used (Claude Sonnet)
or its OpenAI counterpart (the mid "sol" tier for complex coding, not the dearest "astra" one), and priced by the
maintained source (search.llm.maintained_prices). Update the rows and AS_OF together, from the sources; the tests
(tests/llm/test_models.py) fail when the installed SDK stops listing a default, marks it deprecated or shut down,
or when the maintained prices lack it.

`retirement(provider, model)` reads the installed SDK's own marks: the anthropic SDK's DEPRECATED_MODELS (the
end-of-life date it warns about), and the "Deprecated values" list of the openai SDK's ChatModel ("Announced shutdown
date: ..."). A team built with such a model logs a warning, and the run's settings carry it (`model_warnings`).
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import logging
import re

log = logging.getLogger(__name__)

AS_OF = "2026-12-06"
SOURCES = ("anthropic SDK 2.17 types.ModelParam and _data.DEPRECATED_MODELS",
           "openai SDK 3.63 types.shared.ChatModel (its 'Deprecated values')", "genai-prices 0.2.5 (bundled data)")
# provider -> (model, why this one)
DEFAULTS: dict[str, tuple[str, str]] = {
    "anthropic": ("claude-sonnet-5-5", "the newest of the Sonnet tier the paper used (Claude Sonnet 4), listed "
                                       "with no end-of-life; $2 in / $10 out per million tokens"),
    "openai": ("gpt-6.2-sol", "the newest of the sol tier (complex coding and agentic work), listed with no "
                              "announced shutdown; $2 in / $10 out per million tokens; a reasoning model, which "
                              "takes only its default temperature"),
}
DEFAULT_MODEL: dict[str, str] = {provider: model for provider, (model, _) in DEFAULTS.items()}

_SHUTDOWN = re.compile(r"Announced\s+shutdown\s+date:\s*(\d{4}-\d{2}-\d{2})")


@functools.cache
def openai_shutdowns() -> dict[str, str]:
    """Model -> announced shutdown date, from the installed openai SDK's ChatModel docstring ({} if absent)."""
    try:
        from openai.types.shared import chat_model

        source = inspect.getsource(chat_model)
    except (ImportError, OSError, TypeError):
        return {}
    head, _, notes = source.partition("Deprecated values:")
    out: dict[str, str] = {}
    for entry in re.split(r"\n- ", notes):
        match = _SHUTDOWN.search(" ".join(entry.split()))
        if match:
            for name in re.findall(r'"([^"]+)"', entry.split("Announced")[0]):
                out[name] = match.group(1)
    return out


def anthropic_deprecations() -> dict[str, str]:
    """Model -> end-of-life (the SDK's words), from the installed anthropic SDK ({} where it has no list)."""
    try:
        from anthropic._data import DEPRECATED_MODELS
    except ImportError:
        return {}
    return dict(DEPRECATED_MODELS)


def retirement(provider: str, model: str, today: dt.date | None = None) -> str | None:
    """A warning when the installed SDK marks `model` deprecated or past its shutdown, else None."""
    today = today or dt.date.today()
    if provider == "anthropic":
        when = anthropic_deprecations().get(model)
        if when is None:
            return None
        return (f"{model} is deprecated: the anthropic SDK gives its end of life as {when}; choose a current model "
                f"(default {DEFAULT_MODEL['anthropic']}, docs/llm.md)")
    if provider != "openai":
        return None
    date = openai_shutdowns().get(model)
    if date is None:
        return None
    past = dt.date.fromisoformat(date) <= today
    return (f"{model} {'was shut down on' if past else 'shuts down on'} {date} (announced shutdown in the openai SDK's "
            f"model list); choose a current model (default {DEFAULT_MODEL['openai']}, docs/llm.md)")
