"""Typed readers of environment variables, with no Django: the number, word and list readers the Django
settings build on (stark_web/env.py), and the worker heartbeat's readers, which a GPU host's bare `rq worker`
(stark_web/studio/service/worker.py, without Django) calls too.

Each reader fails loudly with `SettingError` naming the variable, the bad value and what would be accepted, so a
typo stops start-up instead of running with a surprise (stark_web/env.py raises Django's ImproperlyConfigured with
the same message).
"""

from __future__ import annotations

import math
import os


class SettingError(ValueError):
    """An environment variable with a value its reader refuses; the message names the variable and the fix."""


TRUE_WORDS = {"1", "true", "yes", "on"}
FALSE_WORDS = {"0", "false", "no", "off", ""}


def envstr(name: str, default: str) -> str:
    return os.environ.get(name, default)


def envbool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    word = raw.strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise SettingError(f"{name}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off.")


def envint(name: str, default: int, minimum: int | None = None, maximum: int | None = None) -> int:
    return _envnumber(name, default, int, minimum, maximum)


def _envnumber(name: str, default, kind: type, minimum, maximum):
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        what = "an integer; set it to a whole number" if kind is int else "a number; set it to a number"
        raise SettingError(f"{name}={raw!r} is not {what} like {default}.") from None
    if not math.isfinite(value):
        raise SettingError(f"{name}={raw!r} is not a finite number; set it to a number like {default}.")
    if minimum is not None and value < minimum or maximum is not None and value > maximum:
        allowed = (f"{minimum} to {maximum}" if minimum is not None and maximum is not None
                   else f"at least {minimum}" if minimum is not None else f"at most {maximum}")
        raise SettingError(f"{name}={value} is out of range; allowed: {allowed} (default {default}).")
    return value


def envchoice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """One of choices (compared without case), returned as spelled in choices."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    found = next((choice for choice in choices if choice.lower() == raw.lower()), None)
    if found is None:
        raise SettingError(f"{name}={raw!r} is not one of {', '.join(choices)}; set it to one of them "
                                   f"(default {default}).")
    return found


def envlist(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def envfloat(name: str, default: float, minimum: float | None = None, maximum: float | None = None) -> float:
    return _envnumber(name, default, float, minimum, maximum)


# --- The worker's heartbeat: read by settings.py at start-up and by the worker class itself ---


def job_heartbeat_s() -> int:
    """How often a worker (stark_web/studio/service/worker.py) beats while it runs a job."""
    return envint("STARK_JOB_HEARTBEAT_S", 30, minimum=1)


def job_heartbeat_grace_s() -> int:
    """Missed-heartbeat grace after which a worker's job counts as abandoned."""
    return envint("STARK_JOB_HEARTBEAT_GRACE_S", 60, minimum=1)
