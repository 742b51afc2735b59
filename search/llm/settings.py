"""Per-role LLM settings (provider, model, temperature, tokens, endpoint, key) built from run options.

Each role (plan, code, debug, single) picks these independently; a role-specific option
(`plan_model`, or `{"plan": {"model": ...}}`) beats the run-wide one (`model`), which beats
the provider's default. Keys come from options or the environment and never appear in a repr.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from search.llm.errors import ConfigError
from search.llm.keys import BASE_URL_ENV, NO_KEY, resolve_key
from search.llm.keys import KEY_ENV as KEY_ENV  # re-exported: client, pages and docs tests read it here
from search.llm.models import DEFAULT_MODEL as DEFAULT_MODEL  # the dated table (search.llm.models)

PROVIDERS = ("anthropic", "openai", "openai-compatible")
CONFIGURABLE_ROLES = ("plan", "code", "debug")  # the roles a run configures one by one (--plan-model, ...)
ROLES = (*CONFIGURABLE_ROLES, "single")  # and the single-agent baselines' one role
DEFAULT_TEMPERATURE = {"plan": 0.8, "code": 0.1, "debug": 0.1, "single": 0.8}
# Tokens of reasoning per effort, on top of the answer's own limit: Anthropic's thinking budget (at least 1,024),
# and the headroom added to OpenAI's max_completion_tokens (which counts the hidden reasoning too).
THINKING_BUDGET = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384, "xhigh": 32768, "max": 65536}


def sdk_efforts() -> tuple[str, ...]:
    """The reasoning efforts the installed SDKs accept, lowest first: the openai SDK's ReasoningEffort and the
    anthropic SDK's output_config effort ("none", reasoning off, is not offered: leave the option out instead)."""
    import typing

    found: set[str] = set()
    try:
        from openai.types.shared.reasoning_effort import ReasoningEffort

        found |= {a for a in typing.get_args(typing.get_args(ReasoningEffort)[0]) if isinstance(a, str)}
    except (ImportError, IndexError):
        pass
    try:
        from anthropic.types.output_config_param import OutputConfigParam

        hint = typing.get_type_hints(OutputConfigParam).get("effort")
        found |= {a for arg in typing.get_args(hint) for a in typing.get_args(arg) if isinstance(a, str)}
    except (ImportError, AttributeError, TypeError, NameError):
        pass
    known = [e for e in THINKING_BUDGET if e in found] or ["minimal", "low", "medium", "high"]
    return tuple(known)


@functools.cache
def reasoning_efforts() -> tuple[str, ...]:
    """sdk_efforts(), asked once, on first use: importing the two SDKs takes seconds of CPU, which a process that
    never reads the efforts (a gpu worker, the web server, most management commands) does not spend."""
    return sdk_efforts()


def __getattr__(name: str) -> Any:
    """REASONING_EFFORTS (the efforts the installed SDKs accept) is reasoning_efforts(), computed on first use."""
    if name == "REASONING_EFFORTS":
        return reasoning_efforts()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# OpenAI models that reason even without reasoning_effort (their default effort is medium): gpt-5 and later
# (not the -chat models), o1/o3/o4.
OPENAI_REASONING_MODEL = re.compile(r"^(o[1-9]|gpt-([5-9]|\d{2}))(?!.*-chat)", re.IGNORECASE)


@dataclass(frozen=True)
class RoleSettings:
    """How one role calls its model. `api_key` is excluded from repr and from to_dict()."""

    role: str
    provider: str
    model: str
    temperature: float | None
    max_tokens: int = 8192
    base_url: str | None = None
    api_key: str = field(default="", repr=False)
    key_source: str = ""  # the variable the key came from ("placeholder", "api_key option")
    timeout_s: float = 600.0
    max_retries: int = 4
    retry_base_s: float = 2.0
    stream: bool = True
    prompt_caching: bool = True
    reasoning_effort: str | None = None  # OpenAI reasoning_effort; Anthropic extended thinking (THINKING_BUDGET)

    @property
    def thinking_budget(self) -> int:
        """Tokens of Anthropic extended thinking, on top of max_tokens (0: off, or not Anthropic)."""
        return THINKING_BUDGET[self.reasoning_effort] if self.reasoning_effort and self.provider == "anthropic" else 0

    @property
    def reasoning_headroom(self) -> int:
        """Tokens added to the answer's limit for hidden reasoning: Anthropic's thinking budget; on api.openai.com the
        effort's budget for a reasoning model (medium's when no effort is set); elsewhere the effort's, if set."""
        if self.provider == "anthropic":
            return self.thinking_budget
        if self.reasoning_effort:
            return THINKING_BUDGET[self.reasoning_effort]
        if self.provider == "openai" and OPENAI_REASONING_MODEL.match(self.model):
            return THINKING_BUDGET["medium"]
        return 0

    @property
    def answer_limit(self) -> int:
        """What the request's token limit says: the answer's own limit plus the reasoning headroom."""
        return self.max_tokens + self.reasoning_headroom

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe description for logs and the run record: everything except the key."""
        return {"role": self.role, "provider": self.provider, "model": self.model,
                "temperature": self.temperature, "max_tokens": self.max_tokens,
                "base_url": self.base_url, "api_key": redact(self.api_key), "key_source": self.key_source,
                "timeout_s": self.timeout_s, "max_retries": self.max_retries,
                "stream": self.stream, "reasoning_effort": self.reasoning_effort}

    def without_temperature(self) -> RoleSettings:
        return replace(self, temperature=None)


def redact(secret: str | None) -> str:
    """Show that a key is set without revealing it."""
    if not secret:
        return "(none)"
    if secret == NO_KEY:
        return NO_KEY
    return f"***{secret[-4:]}" if len(secret) >= 12 else "***"


# The single agent of the baselines both proposes and writes: it falls back to the plan role's options.
FALLBACK_ROLE = {"single": "plan"}


def _pick(options: dict[str, Any], role: str, name: str) -> Any:
    roles = [role] + ([FALLBACK_ROLE[role]] if role in FALLBACK_ROLE else [])
    for r in roles:
        nested = options.get(r)
        if isinstance(nested, dict) and nested.get(name) is not None:
            return nested[name]
        for key in (f"{r}_{name}", f"{r}-{name}"):
            if options.get(key) is not None:
                return options[key]
    return options.get(name)


def flag(value: Any) -> bool:
    """An on/off option: a bool, or its text from a form, a flag or JSON ("1", "true", "yes", "on")."""
    return value if isinstance(value, bool) else str(value or "").strip().lower() in ("1", "true", "yes", "on")


def _number(value: Any, name: str, kind: type) -> Any:
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a {kind.__name__}, got {value!r}") from None


def normalize_base_url(provider: str, url: str | None) -> str | None:
    """Accept `http://host:port` or `.../v1` for every provider: the OpenAI SDK wants the `/v1`
    prefix in the base URL, the Anthropic SDK adds `/v1/messages` itself."""
    if not url:
        return None
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"base URL {url!r} is not an http(s) URL; pass e.g. --base-url http://localhost:8000/v1")
    path = parts.path.rstrip("/")
    if provider == "anthropic":
        path = path.removesuffix("/v1")
    elif path == "":
        path = "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def default_provider(env: dict[str, str], base_url: str | None = None) -> str:
    """The provider when none is named: a base URL given without one means a local OpenAI-compatible server
    (never a vendor whose key happens to be set); otherwise the first vendor with a key."""
    if base_url:
        return "openai-compatible"
    if env.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    if env.get("OPENAI_API_KEY"):
        return "openai"
    if env.get("STARK_LLM_BASE_URL"):
        return "openai-compatible"
    raise ConfigError("no LLM provider configured: pass --provider anthropic|openai|openai-compatible "
                      "(and set ANTHROPIC_API_KEY, OPENAI_API_KEY, or --base-url for a local server), "
                      "or use the offline team: --team rules")


def role_settings(options: dict[str, Any], role: str, env: dict[str, str] | None = None) -> RoleSettings:
    """Resolve one role's settings from run options (CLI flags or a saved run) and the environment."""
    if role not in ROLES:
        raise ConfigError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
    env = dict(os.environ) if env is None else env
    provider = _pick(options, role, "provider") or default_provider(env, _pick(options, role, "base_url"))
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; expected one of {', '.join(PROVIDERS)}")
    model = _pick(options, role, "model") or DEFAULT_MODEL.get(provider)
    if not model:
        raise ConfigError(f"provider {provider} needs a model name: pass --model (e.g. the name your "
                          "vLLM/Ollama server serves, such as qwen2.5-coder:32b)")
    # A run-wide base URL belongs to the run-wide provider: a role switched to another provider uses
    # its own `{role}_base_url` or that provider's environment variable instead.
    # So does a run-wide key (`api_key`, `api_key_env`): it was given for that provider's URL only.
    switched = options.get("provider") not in (None, provider)
    base_url, api_key, api_key_env = (_pick(options, role, name) for name in ("base_url", "api_key", "api_key_env"))
    if switched:
        base_url, api_key, api_key_env = (None if value and value == options.get(name) else value for name, value
                                          in (("base_url", base_url), ("api_key", api_key),
                                              ("api_key_env", api_key_env)))
    base_url = normalize_base_url(provider, base_url or env.get(BASE_URL_ENV[provider]))
    if provider == "openai-compatible" and not base_url:
        raise ConfigError("provider openai-compatible needs a server URL: pass --base-url "
                          "http://HOST:PORT/v1 (vLLM, SGLang, Ollama, llama.cpp) or set STARK_LLM_BASE_URL")
    api_key, key_source = resolve_key(provider, base_url, env, api_key, api_key_env)
    temperature = _pick(options, role, "temperature")
    temperature = DEFAULT_TEMPERATURE[role] if temperature is None else _number(temperature, f"{role} temperature", float)
    settings = RoleSettings(role=role, provider=provider, model=str(model), temperature=temperature,
                            base_url=base_url, api_key=api_key, key_source=key_source)
    overrides: dict[str, Any] = {}
    for name, kind in (("max_tokens", int), ("timeout_s", float), ("max_retries", int), ("retry_base_s", float)):
        value = _pick(options, role, name)
        if value is not None:
            overrides[name] = _number(value, name, kind)
    for name in ("stream", "prompt_caching"):
        value = _pick(options, role, name)
        if value is not None:
            overrides[name] = flag(value)
    effort = _pick(options, role, "reasoning_effort")
    if effort is not None:
        if str(effort).lower() not in reasoning_efforts():
            raise ConfigError(f"{role} reasoning effort {effort!r} is not one of {', '.join(reasoning_efforts())}; "
                              "pass e.g. --reasoning-effort medium (or leave it out)")
        overrides["reasoning_effort"] = str(effort).lower()
    if overrides.get("max_tokens", 1) < 1:
        raise ConfigError("max_tokens must be at least 1")
    return replace(settings, **overrides)


def public_options(options: dict[str, Any]) -> dict[str, Any]:
    """Run options safe to store or show: every `*api_key*` entry (top level or per role) redacted."""
    out: dict[str, Any] = {}
    for name, value in options.items():
        if isinstance(value, dict):
            out[name] = public_options(value)
        elif "api_key" in str(name).lower() and not str(name).lower().endswith("api_key_env"):
            out[name] = redact(str(value) if value else None)
        else:
            out[name] = value
    return out
