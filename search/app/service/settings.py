"""A run's settings from a form, the JSON API or `manage.py stark_run`, checked before anything is stored.

Every bad value raises SettingError naming the field and what would be accepted (shown as a 400).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from search.app.service.errors import SettingError
from search.app.service.inputs import check_values, loads, plain_text

__all__ = ["RunSettings", "SettingError", "parse_run_settings"]

TARGETS = ("cpp", "cuda", "triton", "torch")
DEFAULT_BASELINES = ["eager", "compile"]  # as `python -m search run`; max-autotune only when asked
MAX_BUDGET = 1000
MAX_PARALLEL = 64
# Team options a run may carry (CLI flags of `python -m search run`, per role where it makes sense).
ROLE_OPTIONS = ("provider", "model", "base_url", "temperature", "max_tokens", "timeout_s", "max_retries", "stream")
TEAM_OPTIONS = (
    *ROLE_OPTIONS,
    *(f"{role}_{name}" for role in ("plan", "code", "debug") for name in ROLE_OPTIONS),
    "policy", "n_root", "n_child", "eps", "max_reasks", "max_agent_retries", "top_r", "context_tokens",
    "script", "cost_per_call", "single_agent", "no_debug",
)
# Run settings documented in docs/api.md (a test keeps the two in step).
RUN_FIELDS = ("team", "budget", "parallel", "device", "target", "seed", "time_limit_s", "cost_limit_usd", "eval",
              "name", "team_options")
# Evaluation settings that belong to the server's operator, never to a run (issue 13 V4): where the evaluator
# isolates candidates, where it caches, and the device lock that keeps timings honest.
OPERATOR_EVAL_KEYS = {"sandbox": "the workers' sandbox (bubblewrap where it works)",
                      "cache_dir": "STARK_CACHE_DIR on the workers",
                      "exclusive_device": "always on: timings never overlap"}
# Evaluation settings with an operator's ceiling (settings.STARK_EVAL_CEILINGS: name -> (ceiling, variable)).
CEILING_TYPES = {"correctness_trials": (int, 1), "timing_runs": (int, 1), "warmup_runs": (int, 0),
                 "build_timeout_s": (float, 1), "run_timeout_s": (float, 1), "memory_limit_mb": (int, 256)}
# The other numbers and switches of EvalSettings a run may set: (type, low, high).
EVAL_NUMBERS = {"seed": (int, 0, 2**31 - 1), "atol": (float, 0, 1e6), "rtol": (float, 0, 1e6),
                "roofline_margin": (float, 1, 1e6), "precision_flag_fraction": (float, 0, 1),
                "unstable_timing_fraction": (float, 0, 1e6)}
EVAL_SWITCHES = ("flush_cache", "roofline", "reuse_results")
BASE_URL_OPTIONS = ("base_url", "plan_base_url", "code_base_url", "debug_base_url")
# Bounds of numeric team options, run-wide or per role (a huge max_retries would spin a search worker forever).
OPTION_BOUNDS = {"max_retries": (0, 20), "timeout_s": (1, 3600), "max_tokens": (1, 1_000_000),
                 "temperature": (0, 2), "max_reasks": (0, 10), "max_agent_retries": (0, 10)}


@dataclass
class RunSettings:
    team: str = "rules"
    budget: int = 30
    parallel: int = 1
    device: str = "cpu"
    target: str = ""
    seed: int = 0
    time_limit_s: float | None = None
    cost_limit_usd: float | None = None
    eval: dict[str, Any] = field(default_factory=dict)
    name: str = ""
    team_options: dict[str, Any] = field(default_factory=dict)

    def tree_settings(self) -> dict[str, Any]:
        """The Tree's settings (what the engine and the tree file read)."""
        out: dict[str, Any] = {"budget": self.budget, "parallel": self.parallel, "device": self.device,
                               "target": self.target, "seed": self.seed, "eval": self.eval}
        if self.time_limit_s is not None:
            out["time_limit_s"] = self.time_limit_s
        if self.cost_limit_usd is not None:
            out["cost_limit_usd"] = self.cost_limit_usd
        return out


def _int(data: dict[str, Any], name: str, default: int, low: int, high: int) -> int:
    raw = data.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise SettingError(name, f"{raw!r} is not a whole number; use e.g. {default}") from None
    if not low <= value <= high:
        raise SettingError(name, f"{value} is out of range; use {low} to {high}")
    return value


def _positive(data: dict[str, Any], name: str) -> float | None:
    raw = data.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(str(raw).strip())
    except ValueError:
        raise SettingError(name, f"{raw!r} is not a number") from None
    if not math.isfinite(value):
        raise SettingError(name, f"{raw!r} is not a finite number; leave it out for no limit")
    if not value > 0:
        raise SettingError(name, f"must be positive (got {value:g}); leave it out for no limit")
    return value


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    raw = data.get(name)
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        raw = loads(raw, name)
    if not isinstance(raw, dict):
        raise SettingError(name, "must be a JSON object")
    return dict(raw)


def parse_run_settings(data: dict[str, Any]) -> RunSettings:
    """RunSettings from flat request data; provider settings may come flat or inside team_options."""
    from kernels.settings import device_problem
    from search.teams import TEAM_NAMES, default_target

    check_values(data)
    team = str(data.get("team") or "rules").strip()
    if team not in TEAM_NAMES:
        raise SettingError("team", f"unknown team {team!r}; choose one of {', '.join(TEAM_NAMES)}")
    device = str(data.get("device") or "cpu").strip()
    problem = device_problem(device)
    if problem:
        raise SettingError("device", problem)
    target = str(data.get("target") or default_target(team, device)).strip()
    if target not in TARGETS:
        raise SettingError("target", f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
    if device == "cpu" and target in ("cuda", "triton"):
        raise SettingError("target", f"target {target} needs a CUDA device; use target cpp (or torch) on cpu")
    options = _object(data, "team_options")
    for key in TEAM_OPTIONS:
        if key in data and data[key] not in (None, ""):
            options[key] = data[key]
    secret = sorted(k for k in [*options, *data] if "api_key" in k or "secret" in k)
    if secret:
        raise SettingError(secret[0], "API keys are never stored with a run, nor chosen by one; the operator sets "
                                      "them in the server's environment (ANTHROPIC_API_KEY, ..., or a key per "
                                      "endpoint in STARK_LLM_BASE_URLS)")
    unknown = sorted(set(options) - set(TEAM_OPTIONS))
    if unknown:
        raise SettingError("team_options", f"unknown option(s) {unknown}; known: {', '.join(TEAM_OPTIONS)}")
    _check_options(options)
    settings = RunSettings(
        team=team,
        budget=_int(data, "budget", 30, 1, MAX_BUDGET),
        parallel=_int(data, "parallel", 1, 1, MAX_PARALLEL),
        device=device,
        target=target,
        seed=_int(data, "seed", 0, 0, 2**31 - 1),
        time_limit_s=_positive(data, "time_limit_s"),
        cost_limit_usd=_positive(data, "cost_limit_usd"),
        eval=_eval_settings(data, device),
        name=plain_text(data.get("name"), "name"),
        team_options=options,
    )
    _check_team(settings)
    return settings


def _eval_settings(data: dict[str, Any], device: str) -> dict[str, Any]:
    from kernels import EvalSettings

    raw = _object(data, "eval")
    defaults = EvalSettings().to_dict()
    for key, owner in OPERATOR_EVAL_KEYS.items():
        if key in raw and raw.pop(key) != defaults[key]:
            raise SettingError(f"eval.{key}", f"is set by the server's operator, not per run ({owner}); leave it out")
    _check_ceilings(raw, defaults)
    raw["device"] = device
    raw.setdefault("baselines", DEFAULT_BASELINES)
    if "seed" in data and "seed" not in raw:
        raw["seed"] = _int(data, "seed", 0, 0, 2**31 - 1)
    try:
        out = EvalSettings.from_dict(raw).to_dict()
    except (TypeError, ValueError) as exc:
        raise SettingError("eval", str(exc)) from None
    # Not stored with the run: the workers' own values apply (search/app/service/runs.py drops them too).
    return {k: v for k, v in out.items() if k not in OPERATOR_EVAL_KEYS}


def _check_ceilings(raw: dict[str, Any], defaults: dict[str, Any]) -> None:
    """Trials, runs, timeouts and memory within the operator's ceilings: a value above one is a 400 (never
    silently lowered, so a run measures what it says); a default above one is lowered to it. The other numbers
    and switches must have their type (a string "false" would be a true switch; a string seed breaks a worker)."""
    from django.conf import settings

    for key, (ceiling, variable) in settings.STARK_EVAL_CEILINGS.items():
        kind, low = CEILING_TYPES[key]
        if raw.get(key) is None:
            if defaults[key] > ceiling:
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


def _check_options(options: dict[str, Any]) -> None:
    """Numeric team options within bounds; base URLs only from the operator's list (issue 13 V3)."""
    from search.llm.errors import ConfigError
    from search.llm.keys import ALLOWLIST_ENV, is_operator_base_url, operator_base_urls

    for key, value in options.items():
        base = key.split("_", 1)[1] if key.startswith(("plan_", "code_", "debug_")) else key
        if base in OPTION_BOUNDS and value is not None:
            low, high = OPTION_BOUNDS[base]
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise SettingError(key, f"{value!r} is not a number") from None
            if not low <= number <= high:
                raise SettingError(key, f"{value!r} is out of range; use {low} to {high}")
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


def _check_team(settings: RunSettings) -> None:
    """Build the team once, so a missing API key or a bad option is reported now, not by a worker later."""
    from search.teams import get_team

    try:
        get_team(settings.team, {**settings.team_options, "target": settings.target, "device": settings.device})
    except Exception as exc:  # noqa: BLE001 - every team error here is the user's to fix
        raise SettingError("team", str(exc)) from None
