"""Which API key goes to which endpoint. A key is sent only where it was configured to go, never inferred.

- ANTHROPIC_API_KEY / OPENAI_API_KEY go only to their provider's official endpoint (api.anthropic.com,
  api.openai.com/v1) or to the base URL the operator paired with them (ANTHROPIC_BASE_URL, OPENAI_BASE_URL).
- STARK_LLM_API_KEY goes to openai-compatible servers: STARK_LLM_BASE_URL, or a base URL given on the command
  line that is not in the allow-list; `openai-compatible` never falls back to OPENAI_API_KEY.
- STARK_LLM_BASE_URLS is the operator's allow-list of base URLs (the only ones the web service accepts from
  users), each entry `URL` or `URL=ENV_NAME`: a URL listed with a name gets the key in that variable, one
  listed without gets no server key at all (a placeholder).
- An explicit key for the call's base URL (`api_key`, or `api_key_env` naming a variable, `--api-key-env NAME`)
  beats all of these.
Everything else gets a placeholder (openai-compatible) or a ConfigError naming the fix (anthropic, openai).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from search.llm.errors import ConfigError

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY",
           "openai-compatible": "STARK_LLM_API_KEY"}
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL",
                "openai-compatible": "STARK_LLM_BASE_URL"}
OFFICIAL_BASE_URL = {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com/v1"}
ALLOWLIST_ENV = "STARK_LLM_BASE_URLS"
# An OpenAI-compatible server without auth (a local vLLM/Ollama) still needs some key for the SDK.
NO_KEY = "no-key"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def endpoint(url: str | None) -> str | None:
    """A base URL reduced to what identifies the server: scheme, host, port and path without a trailing
    `/v1` (the SDKs differ in whether they want it). None for no URL or one that is not http(s)."""
    if not url:
        return None
    parts = urlsplit(str(url).strip())
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme.lower() not in _DEFAULT_PORTS or not parts.hostname:
        return None
    scheme = parts.scheme.lower()
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is not None and port != _DEFAULT_PORTS[scheme]:
        host = f"{host}:{port}"
    path = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    return f"{scheme}://{host}{path}"


def same_endpoint(a: str | None, b: str | None) -> bool:
    ea = endpoint(a)
    return ea is not None and ea == endpoint(b)


@dataclass(frozen=True)
class AllowedURL:
    url: str
    key_env: str | None


def allowed_base_urls(env: dict[str, str]) -> list[AllowedURL]:
    """The operator's allow-list from STARK_LLM_BASE_URLS (comma-separated `URL` or `URL=ENV_NAME`).
    Raises ConfigError naming the bad entry."""
    out: list[AllowedURL] = []
    for raw in (env.get(ALLOWLIST_ENV) or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        url, sep, key_env = (part.strip() for part in entry.partition("="))
        if endpoint(url) is None or any(c.isspace() for c in url) or sep and not _ENV_NAME.fullmatch(key_env):
            raise ConfigError(f"{ALLOWLIST_ENV} entry {entry!r} is not an http(s) URL; use "
                              "http://HOST:PORT/v1 or http://HOST:PORT/v1=KEY_VARIABLE, comma-separated")
        out.append(AllowedURL(url, key_env or None))
    return out


def operator_base_urls(env: dict[str, str]) -> list[str]:
    """Base URLs the operator configured: the allow-list and each provider's base URL variable."""
    return [a.url for a in allowed_base_urls(env)] + [env[v] for v in BASE_URL_ENV.values() if env.get(v)]


def is_operator_base_url(url: str, env: dict[str, str]) -> bool:
    return any(same_endpoint(url, allowed) for allowed in operator_base_urls(env))


def resolve_key(provider: str, base_url: str | None, env: dict[str, str], explicit: str | None = None,
                explicit_env: str | None = None) -> tuple[str, str]:
    """(key, where it came from) for a call of `provider` to `base_url` (None: the official endpoint)."""
    if explicit:
        return str(explicit), "api_key option"
    if explicit_env:
        name = str(explicit_env)
        if not env.get(name):
            raise ConfigError(f"--api-key-env {name}: the variable {name} is not set (or empty); export the key "
                              f"for {base_url or provider} in {name}")
        return env[name], name
    own = KEY_ENV[provider]
    official = OFFICIAL_BASE_URL.get(provider)
    if official and (base_url is None or same_endpoint(base_url, official)
                     or same_endpoint(base_url, env.get(BASE_URL_ENV[provider]))):
        if not env.get(own):
            raise ConfigError(f"no API key for provider {provider}: set {own} in the environment")
        return env[own], own
    listed = next((a for a in allowed_base_urls(env) if same_endpoint(base_url, a.url)), None)
    if listed is not None and listed.key_env:
        if not env.get(listed.key_env):
            raise ConfigError(f"{ALLOWLIST_ENV} names {listed.key_env} as the key of {listed.url}, but "
                              f"{listed.key_env} is not set; export it or list the URL without a key")
        return env[listed.key_env], listed.key_env
    if provider == "openai-compatible":
        paired = same_endpoint(base_url, env.get(BASE_URL_ENV[provider]))
        if env.get(own) and (paired or listed is None):
            return env[own], own
        return NO_KEY, "placeholder"
    raise ConfigError(
        f"provider {provider} at {base_url}: {own} is only sent to {official} (or to {BASE_URL_ENV[provider]}); "
        f"name the key for this URL with --api-key-env NAME (run option api_key_env), or list it in "
        f"{ALLOWLIST_ENV} as {base_url}=NAME")
