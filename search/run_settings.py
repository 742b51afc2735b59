"""One run's settings (above the engine and the teams registry, which it names), the same shape for `python -m search run`, `manage.py stark_run`, the JSON API and the
new-run form: `RunSettings`, a frozen dataclass that checks itself. Each constant of a run (targets, roles, team
options, bounds) is defined here once; the web service adds only the operator's rules (evaluation ceilings, the
allowed LLM endpoints, no keys) in stark_web/studio/service/settings.py.

Every bad value raises SettingError naming the field, what is wrong and what would be accepted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from search.engine.limits import DEFAULT_BUDGET, Limits
from search.engine.targets import GPU_TARGETS, TARGET_ABOUT, TARGETS  # noqa: F401 - part of this module's API
from search.llm.pricing import DEFAULT_COST_LIMIT_USD
from search.llm.settings import CONFIGURABLE_ROLES
from search.llm.temperature import STRICT_OPTION
from search.teams import LLM_TEAMS, OFFLINE_TEAM, TEAM_NAMES, default_target

DEFAULT_DEVICE = "cpu"
GPU_DEVICE = "cuda"  # "cuda:N" names one GPU (kernels.parent.settings.device_problem checks every device name)
DEVICE_KINDS = (DEFAULT_DEVICE, GPU_DEVICE)
ROLES = CONFIGURABLE_ROLES  # the agent roles a run may configure one by one
DEFAULT_TEAM = OFFLINE_TEAM
DEFAULT_BASELINES = ("eager", "compile")  # max-autotune only when asked (slow to compile)
MAX_BUDGET = 1000
MAX_PARALLEL = 64
MAX_SEED = 2**31 - 1
# Options of one LLM role, run-wide (`model`) or per role (`plan_model`).
ROLE_OPTIONS = ("provider", "model", "base_url", "temperature", "max_tokens", "timeout_s", "max_retries", "stream",
                "reasoning_effort")
# Run-wide options of the LLM teams: strict_temperatures stops the run when a model refuses a role's temperature.
LLM_RUN_OPTIONS = (STRICT_OPTION,)
SEARCH_OPTIONS = ("policy", "n_root", "n_child", "eps", "max_reasks", "max_agent_retries", "top_r", "context_tokens")
SCRIPTED_OPTIONS = ("script", "cost_per_call", "single_agent", "no_debug")  # the test-only scripted team
TEAM_OPTIONS = (
    *ROLE_OPTIONS,
    *(f"{role}_{name}" for role in ROLES for name in ROLE_OPTIONS),
    *LLM_RUN_OPTIONS,
    *SEARCH_OPTIONS,
    *SCRIPTED_OPTIONS,
)
# Names an environment variable of the machine the run executes on: the CLI's, never a web service's.
LOCAL_ONLY_OPTIONS = ("api_key_env", "price")  # price: the operator sets prices for the service (STARK_PRICES_JSON)
FLAG_OPTIONS = (STRICT_OPTION,)  # on/off options: true/false (JSON), or "on"/"off", "1"/"0", "yes"/"no" as text
FLAG_TEXT = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False, "off": False}
BASE_URL_OPTIONS = ("base_url", *(f"{role}_base_url" for role in ROLES))
# Bounds of numeric team options, run-wide or per role (a huge max_retries would spin a search worker forever).
OPTION_BOUNDS = {"max_retries": (0, 20), "timeout_s": (1, 3600), "max_tokens": (1, 1_000_000),
                 "temperature": (0, 2), "max_reasks": (0, 10), "max_agent_retries": (0, 10)}
# The fields of a run's settings (docs/api.md documents each; a test keeps the two in step).
RUN_FIELDS = ("team", "budget", "parallel", "device", "target", "seed", "time_limit_s", "cost_limit_usd", "eval",
              "name", "team_options", "review_plans", "review_timeout_s")
DEFAULT_REVIEW_TIMEOUT_S = 600.0  # a plan waiting for review goes on unchanged after this (search.engine.steering)
MAX_REVIEW_TIMEOUT_S = 7 * 86400.0


class SettingError(ValueError):
    """A user-fixable problem with one field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class RunSettings:
    """A run's settings, checked on construction. `target` "" means the team's default for the device; `eval`
    holds kernels.EvalSettings fields (device, seed and the default baselines filled in)."""

    team: str = DEFAULT_TEAM
    budget: int = DEFAULT_BUDGET
    parallel: int = 1
    device: str = DEFAULT_DEVICE
    target: str = ""
    seed: int = 0
    time_limit_s: float | None = None
    cost_limit_usd: float | None = None
    eval: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    team_options: Mapping[str, Any] = field(default_factory=dict)
    review_timeout_s: float | None = None  # None: plans are coded at once; else each waits for review this long

    def __post_init__(self) -> None:
        if self.team not in TEAM_NAMES:
            raise SettingError("team", f"unknown team {self.team!r}; choose one of {', '.join(TEAM_NAMES)}")
        _whole("budget", self.budget, 1, MAX_BUDGET)
        _whole("parallel", self.parallel, 1, MAX_PARALLEL)
        _whole("seed", self.seed, 0, MAX_SEED)
        problem = _kernels_settings().device_problem(self.device)
        if problem:
            raise SettingError("device", problem)
        target = self.target or default_target(self.team, self.device)
        if target not in TARGETS:
            raise SettingError("target", f"unknown target {target!r}; choose one of {', '.join(TARGETS)}")
        if not self.device.startswith(GPU_DEVICE) and target in GPU_TARGETS:
            raise SettingError("target", f"target {target} needs a CUDA device; use target cpp (or torch) on cpu")
        object.__setattr__(self, "target", target)
        for name in ("time_limit_s", "cost_limit_usd", "review_timeout_s"):
            _limit(name, getattr(self, name))
        if self.cost_limit_usd is None and self.team in LLM_TEAMS:  # an LLM run never spends without a bound
            object.__setattr__(self, "cost_limit_usd", DEFAULT_COST_LIMIT_USD)
        if self.review_timeout_s is not None and self.review_timeout_s > MAX_REVIEW_TIMEOUT_S:
            raise SettingError("review_timeout_s", f"at most {MAX_REVIEW_TIMEOUT_S:g} s (a week)")
        object.__setattr__(self, "team_options", _checked_options(dict(self.team_options)))
        object.__setattr__(self, "eval", _eval_dict(dict(self.eval), self.device, self.seed))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> RunSettings:
        """From flat data (form fields, a JSON body, CLI flags): numbers may come as text, and team options flat
        (`"model": "m"`) or inside `team_options` (an object or its JSON text)."""
        options = _object(data, "team_options")
        for key in (*TEAM_OPTIONS, *LOCAL_ONLY_OPTIONS):
            if data.get(key) not in (None, ""):
                options[key] = data[key]
        return cls(
            team=str(data.get("team") or DEFAULT_TEAM).strip(),
            budget=_int(data, "budget", DEFAULT_BUDGET),
            parallel=_int(data, "parallel", 1),
            device=str(data.get("device") or DEFAULT_DEVICE).strip(),
            target=str(data.get("target") or "").strip(),
            seed=_int(data, "seed", 0),
            time_limit_s=_float(data, "time_limit_s"),
            cost_limit_usd=_float(data, "cost_limit_usd"),
            eval=_object(data, "eval"),
            name=str(data.get("name") or ""),
            team_options=options,
            review_timeout_s=_review(data),
        )

    def to_data(self) -> dict[str, Any]:
        """The flat data `from_data` reads back into equal settings (a fork starts from it)."""
        return {"team": self.team, "budget": self.budget, "parallel": self.parallel, "device": self.device,
                "target": self.target, "seed": self.seed, "time_limit_s": self.time_limit_s,
                "cost_limit_usd": self.cost_limit_usd, "eval": dict(self.eval), "name": self.name,
                "team_options": dict(self.team_options), "review_plans": self.review_timeout_s is not None,
                "review_timeout_s": self.review_timeout_s}

    def team_config(self) -> dict[str, Any]:
        """The options the team is built with (search.teams.get_team): the team options plus the run's target,
        device, seed (the rules team's move choice) and cost limit (the LLM teams' meter, checked per call)."""
        out = {**self.team_options, "target": self.target, "device": self.device, "seed": self.seed}
        if self.cost_limit_usd is not None:
            out["cost_limit_usd"] = self.cost_limit_usd
        return out

    def tree_settings(self) -> dict[str, Any]:
        """The Tree's settings (what the engine and the tree file read)."""
        out: dict[str, Any] = {"budget": self.budget, "parallel": self.parallel, "device": self.device,
                               "target": self.target, "seed": self.seed, "eval": dict(self.eval)}
        if self.time_limit_s is not None:
            out["time_limit_s"] = self.time_limit_s
        if self.cost_limit_usd is not None:
            out["cost_limit_usd"] = self.cost_limit_usd
        if self.review_timeout_s is not None:
            out["review_timeout_s"] = self.review_timeout_s
        return out

    def limits(self) -> Limits:
        return Limits(self.budget, self.time_limit_s, self.cost_limit_usd)


def team_config(team_options: Mapping[str, Any], settings: Mapping[str, Any]) -> dict[str, Any]:
    """RunSettings.team_config of a stored run: its team options and tree settings (no re-validation)."""
    out = {**team_options, "target": settings.get("target"), "device": settings.get("device", DEFAULT_DEVICE),
           "seed": int(settings.get("seed") or 0)}
    if settings.get("cost_limit_usd") is not None:
        out["cost_limit_usd"] = settings["cost_limit_usd"]
    return out


def _kernels_settings() -> ModuleType:
    """kernels.parent.settings (the one check of device names and evaluation settings), imported when settings are first
    checked: the kernels package loads torch (a second, hundreds of MB), which `python -m search show` and the web
    pages that only import these constants do not need."""
    from kernels.parent import settings

    return settings


def _whole(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise SettingError(name, f"{value!r} is not a whole number")
    if not low <= value <= high:
        raise SettingError(name, f"{value} is out of range; use {low} to {high}")


def _limit(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise SettingError(name, f"{value!r} is not a finite number; leave it out for no limit")
    if not value > 0:
        raise SettingError(name, f"must be positive (got {value:g}); leave it out for no limit")


def _int(data: Mapping[str, Any], name: str, default: int) -> int:
    raw = data.get(name)
    if raw is None or raw == "":
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    try:
        return int(str(raw).strip())
    except ValueError:
        raise SettingError(name, f"{raw!r} is not a whole number; use e.g. {default}") from None


def _float(data: Mapping[str, Any], name: str) -> float | None:
    raw = data.get(name)
    if raw is None or raw == "":
        return None
    try:
        return float(str(raw).strip())
    except ValueError:
        raise SettingError(name, f"{raw!r} is not a number") from None


def _object(data: Mapping[str, Any], name: str) -> dict[str, Any]:
    raw = data.get(name)
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise SettingError(name, f"is not valid JSON ({exc}); send a JSON object") from None
    if not isinstance(raw, Mapping):
        raise SettingError(name, "must be a JSON object")
    return dict(raw)


def _checked_options(options: dict[str, Any]) -> dict[str, Any]:
    """Known option names only; numeric ones within bounds, run-wide or per role."""
    unknown = sorted(set(options) - {*TEAM_OPTIONS, *LOCAL_ONLY_OPTIONS})
    if unknown:
        raise SettingError("team_options", f"unknown option(s) {unknown}; known: {', '.join(TEAM_OPTIONS)}")
    for key in FLAG_OPTIONS:
        if key in options:
            options[key] = _flag_option(key, options[key])
    for key, value in options.items():
        base = key.split("_", 1)[1] if key.startswith(tuple(f"{role}_" for role in ROLES)) else key
        if base in OPTION_BOUNDS and value is not None:
            low, high = OPTION_BOUNDS[base]
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise SettingError(key, f"{value!r} is not a number") from None
            if not low <= number <= high:
                raise SettingError(key, f"{value!r} is out of range; use {low} to {high}")
    return options


def _review(data: Mapping[str, Any]) -> float | None:
    """Plan review: `review_plans` (a flag) turns it on, with `review_timeout_s` (default 600 s) before a waiting
    plan goes on unchanged."""
    raw = data.get("review_plans")
    on = False if raw in (None, "") else _flag_option("review_plans", raw)
    if not on:
        return None
    timeout = _float(data, "review_timeout_s")
    return DEFAULT_REVIEW_TIMEOUT_S if timeout is None else timeout


def _flag_option(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value is None or str(value).strip().lower() not in FLAG_TEXT:
        raise SettingError(key, f"{value!r} is not true or false; send true or false (JSON), or one of "
                                f"{', '.join(FLAG_TEXT)} as text")
    return FLAG_TEXT[str(value).strip().lower()]


def _eval_dict(raw: dict[str, Any], device: str, seed: int) -> dict[str, Any]:
    """kernels.EvalSettings fields for the run's device (and seed, unless set), the default baselines unless
    chosen; every other field as EvalSettings checks it."""
    raw["device"] = device
    raw.setdefault("baselines", list(DEFAULT_BASELINES))
    raw.setdefault("seed", seed)
    try:
        return _kernels_settings().EvalSettings.from_dict(raw).to_dict()
    except (TypeError, ValueError) as exc:
        raise SettingError("eval", str(exc)) from None
