"""The web service's rules over a run's settings (search.run_settings.RunSettings, the one shape of the CLI,
`stark_run`, the API and the form), checked before anything is stored: request values sane, no keys, the
operator's evaluation keys and ceilings, only the operator's LLM endpoints, and a team that builds.

Every bad value raises SettingError naming the field and what would be accepted (shown as a 400).
"""

from __future__ import annotations

import math
import os
from typing import Any

from django.conf import settings as django_settings

from kernels import EvalSettings
from search.engine.agents import Team
from search.engine.engine import selection_settings
from search.llm.errors import ConfigError
from search.llm.keys import ALLOWLIST_ENV, is_operator_base_url, operator_base_urls
from search.run_settings import BASE_URL_OPTIONS, OPTION_BOUNDS, ROLES, RunSettings, SettingError
from search.teams import get_team
from stark_web.studio.service.inputs import check_values, loads, plain_text, refuse_booleans

__all__ = ["RunSettings", "SettingError", "check_stored_options", "parse_run_settings", "service_settings",
           "start_notices", "stored_settings"]

# Evaluation settings that belong to the server's operator, never to a run: where the evaluator
# isolates candidates, where it caches, and the device lock that keeps timings honest.
OPERATOR_EVAL_KEYS = {"sandbox": "the workers' sandbox (bubblewrap where it works)",
                      "cache_dir": "STARK_CACHE_DIR on the workers",
                      "exclusive_device": "always on: timings never overlap"}
# Evaluation settings with an operator's ceiling (settings.STARK_EVAL_CEILINGS: name -> (ceiling, variable)).
CEILING_TYPES = {"correctness_trials": (int, 1), "timing_runs": (int, 1), "warmup_runs": (int, 0),
                 "build_timeout_s": (float, 1), "run_timeout_s": (float, 1), "memory_limit_mb": (int, 256),
                 "disk_limit_mb": (int, 16)}
# The other numbers and switches of EvalSettings a run may set: (type, low, high).
EVAL_NUMBERS = {"seed": (int, 0, 2**31 - 1), "atol": (float, 0, 1e6), "rtol": (float, 0, 1e6),
                "roofline_margin": (float, 1, 1e6), "precision_flag_fraction": (float, 0, 1),
                "unstable_timing_fraction": (float, 0, 1e6), "profile_deadline_s": (float, 0.1, 600)}
EVAL_SWITCHES = ("flush_cache", "roofline", "reuse_results", "profile", "ncu")
# Numbers of a run and of its team's options (run-wide or per role): true/false there is a 400, not 1 or 0.
RUN_NUMBERS = ("budget", "parallel", "seed", "time_limit_s", "cost_limit_usd")
NUMERIC_OPTIONS = (*OPTION_BOUNDS, "n_root", "n_child", "eps", "top_r", "context_tokens", "cost_per_call")


def numeric_options(options: dict[str, Any]) -> list[str]:
    """The keys of `options` that name a numeric team option (`max_tokens`, `plan_temperature`, ...)."""
    roles = tuple(f"{role}_" for role in ROLES)
    return [k for k in options if isinstance(k, str)
            and (k in NUMERIC_OPTIONS or k.startswith(roles) and k.split("_", 1)[1] in NUMERIC_OPTIONS)]


def parse_run_settings(data: dict[str, Any]) -> RunSettings:
    """RunSettings from flat request data (form fields or a JSON body; team options flat or in team_options),
    under the service's rules."""
    check_values(data)
    data = dict(data)
    for name in ("team_options", "eval"):
        if isinstance(data.get(name), str | bytes) and data[name] != "":
            data[name] = loads(data[name], name)
    options = data.get("team_options")
    refuse_booleans(data, (*RUN_NUMBERS, *numeric_options(data)))
    if isinstance(options, dict):
        refuse_booleans(options, numeric_options(options), "team_options.")
    _check_keys_and_prices([*(options if isinstance(options, dict) else {}), *data])
    if data.get("eval") not in (None, ""):
        if not isinstance(data["eval"], dict):
            raise SettingError("eval", "must be a JSON object")
        data["eval"] = _operator_eval(dict(data["eval"]))
    else:
        data["eval"] = _operator_eval({})
    data["name"] = plain_text(data.get("name"), "name")
    return service_settings(RunSettings.from_data(data))


def service_settings(settings: RunSettings) -> RunSettings:
    """The checks that need this server: its LLM endpoints, and a team that builds (a missing key is a 400 now,
    not a failed run later). The evaluation settings keep none of the operator's keys."""
    _check_base_urls(settings.team_options)
    try:
        get_team(settings.team, settings.team_config())
    except Exception as exc:  # noqa: BLE001 - every team error here is the user's to fix
        raise SettingError("team", str(exc)) from None
    return settings


def stored_settings(settings: RunSettings, team: Team | None = None) -> dict[str, Any]:
    """The tree settings a run stores: its evaluation settings without the operator's (the workers' own values
    apply; stark_web.studio.service.runs.eval_settings drops them from old runs too), and its team's selection (policy,
    can_debug), so the steps that only schedule never build the team. `team`: the run's team, when already built."""
    team = team if team is not None else get_team(settings.team, settings.team_config())
    out = {**settings.tree_settings(), **selection_settings(team)}
    out["eval"] = {k: v for k, v in out["eval"].items() if k not in OPERATOR_EVAL_KEYS}
    return out


def start_notices(team: Team) -> list[str]:
    """What the run says at its start (search.teams.llm.start): the price assumed for a model the price data lacks,
    and the roles whose temperature the chosen model will not take, with what the run does instead. Kept in the
    run's meta (`notices`) and shown in the run page's header from the start."""
    return [str(line) for line in team.settings.get("notices") or []]


def _operator_eval(raw: dict[str, Any]) -> dict[str, Any]:
    """The run's evaluation settings under the operator's rules: none of the operator's keys (a value other than
    the default is a 400), trials, runs, timeouts and memory within the ceilings, numbers and switches typed."""
    defaults = EvalSettings().to_dict()
    for key, owner in OPERATOR_EVAL_KEYS.items():
        if key in raw and raw.pop(key) != defaults[key]:
            raise SettingError(f"eval.{key}", f"is set by the server's operator, not per run ({owner}); leave it out")
    _check_ceilings(raw, defaults)
    return raw


def _check_ceilings(raw: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Trials, runs, timeouts and memory within the operator's ceilings: a value above one is a 400 (never
    silently lowered, so a run measures what it says); a default above one is lowered to it. The other numbers
    and switches must have their type (a string "false" would be a true switch; a string seed breaks a worker)."""
    for key, (ceiling, variable) in django_settings.STARK_EVAL_CEILINGS.items():
        kind, low = CEILING_TYPES[key]
        if raw.get(key) is None:  # disk_limit_mb None: memory_limit_mb's
            default = defaults[key] if defaults[key] is not None else raw.get("memory_limit_mb") or defaults["memory_limit_mb"]
            if default > ceiling:
                raw[key] = kind(ceiling)
            continue
        raw[key] = _eval_number(key, raw[key], kind, low, ceiling, f" (this server's ceiling, {variable})")
    for key, (kind, low, high) in EVAL_NUMBERS.items():
        if raw.get(key) is not None:
            raw[key] = _eval_number(key, raw[key], kind, low, high, "")
    for key in EVAL_SWITCHES:
        if key in raw and not isinstance(raw[key], bool):
            raise SettingError(f"eval.{key}", f"{raw[key]!r} is not true or false")


def _eval_number(key: str, value: Any, kind: type, low: float, high: float, why: str) -> int | float:
    try:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError
        number = float(value)
        if kind is int and math.isfinite(number) and not number.is_integer():
            raise ValueError
    except ValueError:
        raise SettingError(f"eval.{key}", f"{value!r} is not a {'whole ' if kind is int else ''}number") from None
    if not math.isfinite(number):
        raise SettingError(f"eval.{key}", f"{value!r} is not a finite number")
    if not low <= number <= high:
        raise SettingError(f"eval.{key}", f"{number:g} is out of range; use {low:g} to {high:g}{why}")
    return kind(number)


def check_stored_options(options: Any) -> None:
    """A stored run's team options under the operator's rules again, at use time (a worker building the team):
    no key, key variable or price, base URLs only from the allow-list, whoever wrote them (a user at creation,
    staff in the admin, anyone with the database). SettingError names the option."""
    if not isinstance(options, dict):
        raise SettingError("team_options", "must be a JSON object")
    _check_keys_and_prices(options)
    _check_base_urls(options)


def _check_keys_and_prices(names: Any) -> None:
    """No option or field that carries a key, names a key variable (api_key_env) or sets a price."""
    secret = sorted(str(k) for k in names if "api_key" in str(k) or "secret" in str(k))
    if secret:
        raise SettingError(secret[0], "API keys are never stored with a run, nor chosen by one; the operator sets "
                                      "them in the server's environment (ANTHROPIC_API_KEY, ..., or a key per "
                                      "endpoint in STARK_LLM_BASE_URLS)")
    if "price" in names:
        raise SettingError("price", "prices are the operator's, never a run's: STARK_PRICES_JSON on the workers "
                                    "(docs/llm.md, Usage and cost)")


def _check_base_urls(options: dict[str, Any]) -> None:
    """Base URLs only from the operator's list."""
    env = dict(os.environ)
    for key in BASE_URL_OPTIONS:
        url = options.get(key)
        if url in (None, ""):
            continue
        try:
            allowed = isinstance(url, str) and is_operator_base_url(url, env)
            listed = operator_base_urls(env)
        except ConfigError as exc:
            raise SettingError(key, f"the server's LLM endpoints are misconfigured: {exc}") from None
        if not allowed:
            hint = f"use one of {', '.join(listed)}" if listed else "this server allows none"
            raise SettingError(key, f"{url!r} is not one of this server's LLM endpoints; {hint} (the operator "
                                    f"lists them in {ALLOWLIST_ENV})")
