"""The default models against the installed SDKs and the maintained prices: each default is listed by its SDK, not
deprecated or shut down there, and priced by the maintained source (a known price, not an assumed one). These
fail when an SDK upgrade retires a default: update search/llm/models.py (DEFAULTS and AS_OF)."""

from __future__ import annotations

import typing

import pytest
from anthropic.types import ModelParam
from openai.types.shared import ChatModel

from search.llm.maintained_prices import _models, maintained_price
from search.llm.models import AS_OF, DEFAULT_MODEL, anthropic_deprecations, retirement


def _listed(kind: object) -> set[str]:
    out: set[str] = set()
    for arg in typing.get_args(kind):
        out |= _listed(arg) if typing.get_args(arg) else {arg} if isinstance(arg, str) else set()
    return out


SDK_MODELS = {"openai": _listed(ChatModel), "anthropic": _listed(ModelParam)}


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_each_default_is_listed_current_and_priced(provider: str) -> None:
    model = DEFAULT_MODEL[provider]
    assert model in SDK_MODELS[provider], f"the installed {provider} SDK no longer lists {model} (models of {AS_OF})"
    assert retirement(provider, model) is None, retirement(provider, model)
    price = maintained_price(provider, model)
    assert price is not None and not price.assumed, f"the maintained prices lack {model}"
    (info,) = [m for m in _models(provider) if m.is_match(model)][:1]
    assert not info.deprecated, f"the maintained source marks {model} deprecated"


def test_every_model_the_sdks_list_has_a_known_price_or_is_a_preview() -> None:
    # The maintained source keeps up with the SDKs: a listed model it lacks would be charged an assumed price.
    missing = sorted(m for provider, models in SDK_MODELS.items() for m in models
                     if maintained_price(provider, m) is None and "preview" not in m and "mythos" not in m
                     and m not in anthropic_deprecations() and not m.startswith(("gpt-3", "gpt-4", "o1", "chatgpt",
                                                                                  "codex", "computer")))
    assert len(missing) <= 5, missing


def test_a_default_the_sdk_marks_deprecated_is_warned_about(monkeypatch: pytest.MonkeyPatch) -> None:
    import anthropic._data

    monkeypatch.setattr(anthropic._data, "DEPRECATED_MODELS", {DEFAULT_MODEL["anthropic"]: "May 1st, 2027"},
                        raising=False)
    assert "is deprecated: the anthropic SDK gives its end of life as May 1st, 2027" in (
        retirement("anthropic", DEFAULT_MODEL["anthropic"]) or "")
