"""A run's settings from a form, the JSON API or `manage.py stark_run`, checked before anything is stored.

Every bad value raises SettingError naming the field and what would be accepted (shown as a 400).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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


class SettingError(ValueError):
    """A user-fixable problem with one field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


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
    if not value > 0:
        raise SettingError(name, f"must be positive (got {value:g}); leave it out for no limit")
    return value


def _object(data: dict[str, Any], name: str) -> dict[str, Any]:
    import json

    raw = data.get(name)
    if raw is None or raw == "":
        return {}
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise SettingError(name, f"is not valid JSON ({exc}); send a JSON object") from None
    if not isinstance(raw, dict):
        raise SettingError(name, "must be a JSON object")
    return raw


def parse_run_settings(data: dict[str, Any]) -> RunSettings:
    """RunSettings from flat request data; provider settings may come flat or inside team_options."""
    from search.teams import TEAM_NAMES, default_target

    team = str(data.get("team") or "rules").strip()
    if team not in TEAM_NAMES:
        raise SettingError("team", f"unknown team {team!r}; choose one of {', '.join(TEAM_NAMES)}")
    device = str(data.get("device") or "cpu").strip()
    if not (device == "cpu" or device == "cuda" or (device.startswith("cuda:") and device[5:].isdigit())):
        raise SettingError("device", f"{device!r} is not a device; use cpu, cuda or cuda:N")
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
        raise SettingError(secret[0], "API keys are never stored with a run; set the provider's key in the "
                                      "server's environment (e.g. ANTHROPIC_API_KEY) instead")
    unknown = sorted(set(options) - set(TEAM_OPTIONS))
    if unknown:
        raise SettingError("team_options", f"unknown option(s) {unknown}; known: {', '.join(TEAM_OPTIONS)}")
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
        name=str(data.get("name") or "")[:200],
        team_options=options,
    )
    _check_team(settings)
    return settings


def _eval_settings(data: dict[str, Any], device: str) -> dict[str, Any]:
    from kernels import EvalSettings

    raw = _object(data, "eval")
    raw["device"] = device
    raw.setdefault("baselines", DEFAULT_BASELINES)
    if "seed" in data and "seed" not in raw:
        raw["seed"] = _int(data, "seed", 0, 0, 2**31 - 1)
    try:
        return EvalSettings.from_dict(raw).to_dict()
    except (TypeError, ValueError) as exc:
        raise SettingError("eval", str(exc)) from None


def _check_team(settings: RunSettings) -> None:
    """Build the team once, so a missing API key or a bad option is reported now, not by a worker later."""
    from search.teams import get_team

    try:
        get_team(settings.team, {**settings.team_options, "target": settings.target, "device": settings.device})
    except Exception as exc:  # noqa: BLE001 - every team error here is the user's to fix
        raise SettingError("team", str(exc)) from None
