"""Per-role settings from run options and the environment; keys never shown."""

from __future__ import annotations

import pytest

from search.llm import ConfigError, public_options, role_settings
from search.llm.settings import normalize_base_url

SECRET = "sk-ant-very-secret-value-1234"


def test_roles_get_the_paper_temperatures_by_default() -> None:
    opts = {"provider": "anthropic", "api_key": SECRET}
    temps = {role: role_settings(opts, role).temperature for role in ("plan", "code", "debug")}
    assert temps == {"plan": 0.8, "code": 0.1, "debug": 0.1}


def test_role_options_beat_run_options() -> None:
    opts = {"provider": "anthropic", "api_key": SECRET, "model": "claude-sonnet-4-5", "max_tokens": 4000,
            "plan_model": "claude-opus-4-5", "plan_temperature": "1.0",
            "code": {"provider": "openai-compatible", "base_url": "http://gpu-box:8000", "model": "qwen"}}
    plan, code, debug = (role_settings(opts, r) for r in ("plan", "code", "debug"))
    assert (plan.model, plan.temperature, plan.max_tokens) == ("claude-opus-4-5", 1.0, 4000)
    assert (code.provider, code.model, code.base_url) == ("openai-compatible", "qwen", "http://gpu-box:8000/v1")
    assert (debug.provider, debug.model) == ("anthropic", "claude-sonnet-4-5")
    # The single agent of the baselines falls back to the plan role's options.
    assert role_settings(opts, "single").model == "claude-opus-4-5"


def test_keys_come_from_the_environment_and_never_show(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    settings = role_settings({}, "plan")
    assert settings.provider == "anthropic" and settings.api_key == SECRET
    assert SECRET not in repr(settings) and SECRET not in str(settings.to_dict())
    assert settings.to_dict()["api_key"] == "***1234"


@pytest.mark.parametrize("opts,words", [
    ({}, "--provider"),
    ({"provider": "anthropic"}, "ANTHROPIC_API_KEY"),
    ({"provider": "openai"}, "OPENAI_API_KEY"),
    ({"provider": "openai-compatible", "model": "m"}, "--base-url"),
    ({"provider": "openai-compatible", "base_url": "http://h:1"}, "--model"),
    ({"provider": "bedrock"}, "anthropic, openai, openai-compatible"),
    ({"provider": "anthropic", "api_key": "k", "plan_temperature": "hot"}, "plan temperature"),
    ({"provider": "anthropic", "api_key": "k", "base_url": "localhost:8000"}, "http(s) URL"),
])
def test_missing_or_bad_settings_name_the_fix(opts: dict, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        role_settings(opts, "plan")
    assert words in str(info.value)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("provider,url,expected", [
    ("openai-compatible", "http://localhost:11434", "http://localhost:11434/v1"),
    ("openai-compatible", "http://localhost:8000/v1/", "http://localhost:8000/v1"),
    ("anthropic", "http://proxy:9000/v1", "http://proxy:9000"),
    ("anthropic", "https://api.anthropic.com", "https://api.anthropic.com"),
])
def test_base_urls_work_with_or_without_v1(provider: str, url: str, expected: str) -> None:
    assert normalize_base_url(provider, url) == expected


def test_a_run_wide_base_url_belongs_to_the_run_wide_provider() -> None:
    env = {"STARK_LLM_BASE_URL": "http://gpu-box:8000/v1"}
    opts = {"provider": "anthropic", "api_key": SECRET, "base_url": "http://claude-proxy:9000",
            "code_provider": "openai-compatible", "code_model": "qwen"}
    assert role_settings(opts, "plan", env).base_url == "http://claude-proxy:9000"
    assert role_settings(opts, "code", env).base_url == "http://gpu-box:8000/v1"
    opts["code_base_url"] = "http://other:1/v1"
    assert role_settings(opts, "code", env).base_url == "http://other:1/v1"


def test_public_options_hide_every_key() -> None:
    opts = {"provider": "anthropic", "api_key": SECRET, "plan": {"api_key": SECRET, "model": "m"},
            "code_api_key": SECRET, "model": "x"}
    shown = public_options(opts)
    assert SECRET not in repr(shown)
    assert shown["plan"]["model"] == "m" and shown["model"] == "x" and shown["code_api_key"] == "***1234"
