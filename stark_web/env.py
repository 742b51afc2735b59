"""Typed readers for settings that come from environment variables.

Each helper fails loudly with ``ImproperlyConfigured`` naming the variable, the bad value and
what would be accepted, so a typo stops start-up instead of running with a surprise. stark_web/settings.py reads
every variable of the Django side at start-up; the few read again outside it have one reader here, called by
settings.py (so `manage.py check` and every process start validate them) and by their user.

The number, word and list readers and the worker heartbeat's readers live in search/env_readers.py (no Django: a
GPU host's bare `rq worker` reads its heartbeat there); here they raise Django's error with the same message.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import ParamSpec, TypeVar
from urllib.parse import unquote, urlparse

from django.core.exceptions import ImproperlyConfigured

from search import env_readers

P = ParamSpec("P")
R = TypeVar("R")


def _django_error(reader: Callable[P, R]) -> Callable[P, R]:
    """`reader` raising Django's ImproperlyConfigured (what manage.py reports as a bad setting) for its SettingError."""

    @functools.wraps(reader)
    def read(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return reader(*args, **kwargs)
        except env_readers.SettingError as exc:
            raise ImproperlyConfigured(str(exc)) from None

    return read


envstr = _django_error(env_readers.envstr)
envbool = _django_error(env_readers.envbool)
envint = _django_error(env_readers.envint)
envfloat = _django_error(env_readers.envfloat)
envchoice = _django_error(env_readers.envchoice)
envlist = _django_error(env_readers.envlist)
job_heartbeat_s = _django_error(env_readers.job_heartbeat_s)
job_heartbeat_grace_s = _django_error(env_readers.job_heartbeat_grace_s)


def redis_url(name: str, default: str) -> str:
    raw = os.environ.get(name, default)
    parsed = urlparse(raw)
    if parsed.scheme not in {"redis", "rediss", "unix"} or (parsed.scheme != "unix" and not parsed.hostname):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not a Redis URL; use redis://:PASSWORD@HOST:PORT/DB (e.g. {DEFAULT_REDIS_URL}) or unix://:PASSWORD@/path/to/redis.sock?db=0."
        )
    try:
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} has a bad port; use redis://HOST:PORT/DB.") from None
    return raw


INSTANCE_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"


def instance_id(name: str, var_dir: Path) -> str:
    """The name that namespaces this installation's Redis keys (queues, job ids, channel groups, locks).

    STARK_INSTANCE when set (the same on every host of one installation); otherwise derived from the var
    directory, so two checkouts on one host never share jobs even when they share a Redis."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return "i" + hashlib.sha256(str(var_dir.resolve()).encode()).hexdigest()[:8]
    if not INSTANCE_PATTERN.fullmatch(raw):
        raise ImproperlyConfigured(
            f"{name}={raw!r} is not an instance name; use 1-32 letters, digits, '-' or '_' (e.g. prod)."
        )
    return raw


def private_redis_url(var_dir: Path) -> str:
    """The URL of the password-protected Redis that `make run` starts for this var directory (written by
    scripts/private_redis.py), so manage.py commands run beside `make run` find it; else the local default."""
    path = var_dir / "redis" / "url"
    try:
        return path.read_text().strip() or DEFAULT_REDIS_URL
    except OSError:
        return DEFAULT_REDIS_URL


def database_config(name: str, var_dir: Path) -> dict:
    """Django DATABASES['default'] from a URL: sqlite:///path (default, WAL mode) or postgres://user:pw@host/db."""
    default_path = var_dir / "stark.sqlite3"
    raw = os.environ.get(name, "")
    if not raw:
        return sqlite_config(default_path)
    parsed = urlparse(raw)
    if parsed.scheme == "sqlite":
        path = unquote(parsed.path)
        if raw.startswith("sqlite:///") and path.startswith("//"):
            path = path[1:]
        elif path.startswith("/") and not raw.startswith("sqlite:////"):
            path = path[1:]  # sqlite:///relative/path.db -> relative to the project
        if not path:
            raise ImproperlyConfigured(f"{name}={raw!r} names no file; use sqlite:///var/stark.sqlite3 or sqlite:////abs/path.db.")
        return sqlite_config(Path(path))
    if parsed.scheme in {"postgres", "postgresql", "pgsql"}:
        if not parsed.path.strip("/"):
            raise ImproperlyConfigured(f"{name}={raw!r} names no database; use postgres://USER:PASSWORD@HOST:5432/DBNAME.")
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parsed.path.lstrip("/")),
            "USER": unquote(parsed.username or ""),
            "PASSWORD": unquote(parsed.password or ""),
            "HOST": parsed.hostname or "",
            "PORT": str(parsed.port or ""),
            "CONN_MAX_AGE": 60,
        }
    raise ImproperlyConfigured(
        f"{name}={raw!r} is not a supported database URL; use sqlite:///var/stark.sqlite3 or postgres://USER:PASSWORD@HOST/DB."
    )


def sqlite_config(path: Path) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    return {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(path),
        "OPTIONS": {
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA busy_timeout=30000;",
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
        },
        "TEST": {"NAME": str(path.with_name(path.stem + "-test.sqlite3"))},
    }


def secret_key(name: str, production: bool, var_dir: Path) -> str:
    """SECRET_KEY from the environment; locally generated once and kept under var/."""
    raw = os.environ.get(name)
    if raw:
        if production and (len(raw) < 50 or len(set(raw)) < 5 or raw.startswith("django-insecure")):
            raise ImproperlyConfigured(f"{name} is too weak for production; use at least 50 random characters "
                                       "(`python -c 'import secrets; print(secrets.token_urlsafe(50))'`).")
        return raw
    if production:
        raise ImproperlyConfigured(
            f"{name} must be set when STARK_PRODUCTION=1; generate one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(50))'`."
        )
    path = var_dir / "secret_key"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


# --- Policy: operator-owned limits of users' runs, production hardening (docs/settings.md) ---


def eval_ceilings() -> dict[str, tuple[float, str]]:
    """Ceilings of the evaluation settings a web/API run may ask for: name -> (ceiling, variable).
    A run above one gets a 400 naming the field and the variable (stark_web/studio/service/settings.py)."""
    return {
        "correctness_trials": (envint("STARK_EVAL_MAX_TRIALS", 100, minimum=1), "STARK_EVAL_MAX_TRIALS"),
        "timing_runs": (envint("STARK_EVAL_MAX_TIMING_RUNS", 10000, minimum=1), "STARK_EVAL_MAX_TIMING_RUNS"),
        "warmup_runs": (envint("STARK_EVAL_MAX_WARMUP_RUNS", 1000, minimum=0), "STARK_EVAL_MAX_WARMUP_RUNS"),
        "build_timeout_s": (envfloat("STARK_EVAL_MAX_BUILD_TIMEOUT_S", 900.0, minimum=1),
                            "STARK_EVAL_MAX_BUILD_TIMEOUT_S"),
        "run_timeout_s": (envfloat("STARK_EVAL_MAX_RUN_TIMEOUT_S", 600.0, minimum=1), "STARK_EVAL_MAX_RUN_TIMEOUT_S"),
        "memory_limit_mb": (envint("STARK_EVAL_MAX_MEMORY_MB", 16384, minimum=256), "STARK_EVAL_MAX_MEMORY_MB"),
        "disk_limit_mb": (envint("STARK_EVAL_MAX_DISK_MB", 16384, minimum=16), "STARK_EVAL_MAX_DISK_MB"),
    }


def production_debug(production: bool, debug: bool) -> bool:
    if production and debug:
        raise ImproperlyConfigured("DEBUG=1 is refused with STARK_PRODUCTION=1: debug pages show settings and "
                                   "code to anyone; unset DEBUG (or STARK_PRODUCTION on a development machine).")
    return debug


def proxy_ssl_header(name: str) -> tuple[str, str] | None:
    """`X-Forwarded-Proto=https` -> ("HTTP_X_FORWARDED_PROTO", "https") for SECURE_PROXY_SSL_HEADER."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    header, sep, value = (part.strip() for part in raw.partition("="))
    if not sep or not header or not value or not all(c.isalnum() or c in "-_" for c in header):
        raise ImproperlyConfigured(f"{name}={raw!r} is not HEADER=VALUE; use e.g. X-Forwarded-Proto=https "
                                   "(the header your TLS-terminating proxy sets).")
    return "HTTP_" + header.upper().replace("-", "_"), value


# --- Variables read outside settings.py too: one reader each, validated by settings.py at start-up ---


def header_name(name: str) -> str:
    """An HTTP header's name (e.g. X-Forwarded-For), or "" when unset."""
    raw = os.environ.get(name, "").strip()
    if raw and not all(c.isalnum() or c in "-_" for c in raw):
        raise ImproperlyConfigured(f"{name}={raw!r} is not a header name; use a header name like X-Forwarded-For "
                                   "(the one your proxy sets), or leave it unset.")
    return raw
