"""Which key goes where: the stub server records the credential it received.

A vendor key goes only to its vendor's endpoint or the URL the operator paired with it; a custom base URL
gets only a key named for it; nothing is inferred from the keys that happen to be set."""

from __future__ import annotations

import pytest

from search.llm import ConfigError, LLMClient, load_prices, role_settings
from tests.llm.stub_server import StubLLMServer

VENDOR = {"ANTHROPIC_API_KEY": "sk-ant-vendor-secret-1111", "OPENAI_API_KEY": "sk-openai-vendor-secret-2222"}


def call(stub: StubLLMServer, options: dict, env: dict[str, str], role: str = "plan") -> str | None:
    """Send one request through the real SDK; return the credential the server received."""
    settings = role_settings({"model": "m", "stream": False, **options}, role, env)
    before = len(stub.requests)
    LLMClient(settings, prices=load_prices({})).complete("s", "q")
    assert len(stub.requests) == before + 1
    return stub.requests[-1].credential


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_vendor_key_never_goes_to_a_user_base_url(stub: StubLLMServer, provider: str) -> None:
    with pytest.raises(ConfigError) as info:
        role_settings({"provider": provider, "base_url": stub.url, "model": "m"}, "plan", dict(VENDOR))
    message = str(info.value)
    assert "--api-key-env" in message and "STARK_LLM_BASE_URLS" in message
    assert not stub.requests


@pytest.mark.slow
@pytest.mark.parametrize("stream", [True, False])
def test_openai_compatible_never_falls_back_to_the_openai_key(stub: StubLLMServer, stream: bool) -> None:
    assert call(stub, {"provider": "openai-compatible", "base_url": stub.url, "stream": stream},
                dict(VENDOR)) == "no-key"


@pytest.mark.parametrize("stream", [True, False])
def test_a_base_url_without_a_provider_is_a_local_server_not_the_vendor_whose_key_is_set(
        stub: StubLLMServer, stream: bool) -> None:
    settings = role_settings({"base_url": stub.url, "model": "m"}, "plan", dict(VENDOR))
    assert settings.provider == "openai-compatible"
    assert call(stub, {"base_url": stub.url, "stream": stream}, dict(VENDOR)) == "no-key"
    assert stub.requests[-1].path == "/v1/chat/completions"


def test_a_vendor_key_goes_to_the_url_the_operator_paired_it_with(stub: StubLLMServer) -> None:
    env = {**VENDOR, "ANTHROPIC_BASE_URL": stub.url}
    assert call(stub, {"provider": "anthropic"}, env) == VENDOR["ANTHROPIC_API_KEY"]
    assert call(stub, {"provider": "anthropic", "base_url": stub.url + "/v1/"}, env) == VENDOR["ANTHROPIC_API_KEY"]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "openai-compatible"])
def test_an_explicitly_named_key_goes_to_its_url(stub: StubLLMServer, provider: str) -> None:
    env = {**VENDOR, "GATEWAY_KEY": "sk-gateway-3333"}
    assert call(stub, {"provider": provider, "base_url": stub.url, "api_key_env": "GATEWAY_KEY"}, env) == \
        "sk-gateway-3333"
    with pytest.raises(ConfigError, match="the variable MISSING_KEY is not set"):
        role_settings({"provider": provider, "base_url": stub.url, "model": "m", "api_key_env": "MISSING_KEY"},
                      "plan", env)


def test_the_allow_list_gives_each_url_its_own_key_or_none(stub: StubLLMServer) -> None:
    env = {**VENDOR, "STARK_LLM_API_KEY": "sk-stark-llm-4444", "VLLM_KEY": "sk-vllm-5555",
           "STARK_LLM_BASE_URLS": f"http://elsewhere:1/v1, {stub.url}/v1=VLLM_KEY"}
    for provider in ("openai-compatible", "anthropic", "openai"):
        assert call(stub, {"provider": provider, "base_url": stub.url}, env) == "sk-vllm-5555"
    # Listed without a key of its own: no server key goes there, not even STARK_LLM_API_KEY.
    env["STARK_LLM_BASE_URLS"] = f"{stub.url}/v1"
    assert call(stub, {"provider": "openai-compatible", "base_url": stub.url}, env) == "no-key"
    with pytest.raises(ConfigError):
        role_settings({"provider": "anthropic", "base_url": stub.url, "model": "m"}, "plan", env)
    env["STARK_LLM_BASE_URLS"] = f"{stub.url}/v1=UNSET_KEY"
    with pytest.raises(ConfigError, match="UNSET_KEY is not set"):
        role_settings({"provider": "openai-compatible", "base_url": stub.url, "model": "m"}, "plan", env)


def test_stark_llm_api_key_goes_to_its_own_server(stub: StubLLMServer) -> None:
    env = {**VENDOR, "STARK_LLM_API_KEY": "sk-stark-llm-4444", "STARK_LLM_BASE_URL": stub.url}
    assert call(stub, {"provider": "openai-compatible"}, env) == "sk-stark-llm-4444"
    # The command line's --base-url for an openai-compatible server (docs/llm.md) gets it too.
    del env["STARK_LLM_BASE_URL"]
    assert call(stub, {"provider": "openai-compatible", "base_url": stub.url}, env) == "sk-stark-llm-4444"


def test_a_run_wide_key_does_not_follow_a_role_to_another_server(stub: StubLLMServer) -> None:
    env = {**VENDOR, "PROXY_KEY": "sk-proxy-6666", "STARK_LLM_BASE_URL": stub.url}
    options = {"provider": "anthropic", "base_url": "http://claude-proxy:9000", "api_key_env": "PROXY_KEY",
               "code_provider": "openai-compatible"}
    assert role_settings({**options, "model": "m"}, "plan", env).key_source == "PROXY_KEY"
    assert call(stub, options, env, role="code") == "no-key"


@pytest.mark.parametrize("value", ["ftp://x", "http://a:1/v1=bad name", "not a url"])
def test_a_bad_allow_list_entry_is_named(value: str) -> None:
    from search.llm.keys import allowed_base_urls

    with pytest.raises(ConfigError, match="STARK_LLM_BASE_URLS entry"):
        allowed_base_urls({"STARK_LLM_BASE_URLS": value})
