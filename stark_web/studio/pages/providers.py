"""Which LLM providers this server can call (keys come from its environment, never from the browser)."""

from __future__ import annotations

import os
from typing import TypedDict

from search.llm.settings import BASE_URL_ENV, DEFAULT_MODEL, KEY_ENV, PROVIDERS
from search.run_settings import ROLES
from search.teams import LLM_TEAMS, OFFLINE_TEAM

__all__ = ["LLM_TEAMS", "OFFLINE_TEAM", "ROLES", "Provider", "any_ready", "providers"]


class Provider(TypedDict):
    name: str
    ready: bool
    key_env: str
    default_model: str
    how: str


def providers(env: dict[str, str] | None = None) -> list[Provider]:
    env = dict(os.environ) if env is None else env
    out: list[Provider] = []
    for name in PROVIDERS:
        if name == "openai-compatible":
            ready = bool(env.get(BASE_URL_ENV[name]))
            how = f"set {BASE_URL_ENV[name]} (e.g. http://localhost:8000/v1) for a vLLM/SGLang/Ollama server"
        else:
            ready = bool(env.get(KEY_ENV[name]))
            how = f"set {KEY_ENV[name]} in the server's environment"
        out.append(Provider(name=name, ready=ready, key_env=KEY_ENV[name], default_model=DEFAULT_MODEL.get(name, ""),
                            how=how))
    return out


def any_ready(env: dict[str, str] | None = None) -> bool:
    return any(p["ready"] for p in providers(env))
