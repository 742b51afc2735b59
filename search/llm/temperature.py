"""Which roles of a run ran without their temperature, and why: decided per run and per (provider, base_url,
model, role), shown by the run header, the tree, the node's agent tab and the CLI's summary.

The rule: a role whose model refuses its temperature (a 400 naming `temperature`) re-sends that call without
one and leaves it out of its later calls *in the same run*; another role on the same model keeps sending its own
temperature until a call of its own is refused. A refusal never pre-empts another role: the paper's split
(plan 0.8, code and debug 0.1) is part of the method, and a refusal of one value does not prove the other is
refused (a model that takes only 0 to 1, or only its default, refuses 1.2 or 0.8 but may take 0.1), so dropping
it for a role that was never refused would change the method with no evidence. It costs at most one refused,
unbilled request per role per run. Nothing is shared between runs or users: each run's team holds its own
TemperatureMemory, which a resumed run (or a service job that rebuilds the team) seeds from the call records
stored on its nodes (`refusals`).

Each call record says what happened: `temperature` (sent), `temperature_requested`, `temperature_dropped`
("refused": the model refused it, on this call or an earlier one of the role in this run; "reasoning": a
reasoning effort takes none) and `temperature_note` (why, with the provider's message: the node's agent tab). With strict temperatures a refusal is an error
that stops the run instead (`strict_error`), and no call is re-sent without the temperature.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from search.llm.errors import LLMError
from search.llm.settings import CONFIGURABLE_ROLES, RoleSettings

REFUSED = "refused"  # the model refused the role's temperature
REASONING = "reasoning"  # the role asked for a reasoning effort, which takes no temperature
DROPPED_KINDS = (REFUSED, REASONING)
STRICT_OPTION = "strict_temperatures"  # the run option; the CLI's --strict-temperatures
SEED_OPTION = "temperature_refusals"  # team option: the refusals a run recorded so far (from its call records)


@dataclass(frozen=True)
class Refusal:
    """A role's model refused its temperature: `reason` is the provider's message."""

    role: str
    provider: str
    model: str
    requested: float
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class TemperatureMemory:
    """One run's refusals, by (provider, base_url, model, role); shared by the run's clients (thread-safe)."""

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict
        self._refused: dict[tuple[str, str | None, str, str], Refusal] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(settings: RoleSettings) -> tuple[str, str | None, str, str]:
        return (settings.provider, settings.base_url, settings.model, settings.role)

    def refused(self, settings: RoleSettings) -> Refusal | None:
        """This role's refusal on this model, if it had one in this run."""
        with self._lock:
            return self._refused.get(self.key(settings))

    def refuse(self, settings: RoleSettings, reason: str, requested: float | None = None) -> Refusal:
        """Remember that the role's model refused its temperature (the role's later calls leave it out)."""
        asked = settings.temperature if requested is None else requested
        refusal = Refusal(settings.role, settings.provider, settings.model, float(asked or 0.0), reason)
        with self._lock:
            self._refused.setdefault(self.key(settings), refusal)
            return self._refused[self.key(settings)]

    def seed(self, role_set: Mapping[str, RoleSettings], recorded: Iterable[Mapping[str, Any]]) -> None:
        """Take the refusals a run recorded (`refusals` of its calls) for the roles whose provider and model are
        still those of `role_set` (a resumed run with another --model asks that model afresh)."""
        for entry in recorded:
            settings = role_set.get(str(entry.get("role")))
            if settings is not None and (settings.provider, settings.model) == (entry.get("provider"),
                                                                                 entry.get("model")):
                self.refuse(settings, str(entry.get("reason") or ""), entry.get("requested"))

    def to_list(self) -> list[dict[str, Any]]:
        with self._lock:
            return [r.to_dict() for r in self._refused.values()]


def strict_error(settings: RoleSettings, requested: float, detail: str, status: int | None = None) -> LLMError:
    """The error that stops a run with strict temperatures: names the model, the role and the fix."""
    flag = f"--{settings.role}-model" if settings.role in CONFIGURABLE_ROLES else "--plan-model (or --model)"
    return LLMError(
        f"{settings.model} ({settings.provider}) refused the {settings.role} agent's temperature {requested:g} "
        f"({detail}); strict temperatures (--strict-temperatures, run option {STRICT_OPTION}) make that an error "
        f"instead of running the {settings.role} agent without its temperature: drop --strict-temperatures to let "
        f"it run without one, or choose a {settings.role} model that takes a temperature ({flag})",
        permanent=True, status=status, kind="temperature")


def dropped(call: Mapping[str, Any]) -> bool:
    """Whether a call record was sent without the temperature its role asked for."""
    return call.get("temperature_requested") is not None and call.get("temperature") is None


def refusals(usages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The refusals recorded in the call records of a run's nodes (their `usage`), one per (role, provider,
    model): what seeds the memory of a resumed run (team option `temperature_refusals`)."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for call in (c for usage in usages for c in (usage or {}).get("calls") or []):
        if call.get("temperature_dropped") == REFUSED and call.get("temperature_requested") is not None:
            key = (str(call.get("role")), str(call.get("provider")), str(call.get("model")))
            out.setdefault(key, {"role": key[0], "provider": key[1], "model": key[2],
                                 "requested": call["temperature_requested"],
                                 "reason": str(call.get("temperature_note") or "")})
    return list(out.values())


def why_text(call: Mapping[str, Any]) -> str:
    """Why a call went without its temperature, in a few words."""
    kind = call.get("temperature_dropped")
    if kind == REFUSED:
        return f"{call.get('model')} rejects temperature"
    if kind == REASONING:
        return "its reasoning effort takes none"
    return f"not sent to {call.get('model')}"


def notices(nodes: Iterable[tuple[int, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """One notice per role, model and cause among the calls of `nodes` ((node id, usage) pairs) sent without
    their role's temperature: {role, model, requested, kind, why, nodes, calls, detail, text}, in role order."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for node_id, usage in nodes:
        for call in (usage or {}).get("calls") or []:
            if not dropped(call):
                continue
            role, model, kind = str(call.get("role")), str(call.get("model")), str(call.get("temperature_dropped") or "")
            notice = found.setdefault((role, model, kind), {
                "role": role, "model": model, "requested": call["temperature_requested"], "kind": kind,
                "why": why_text(call), "nodes": [], "calls": 0,
                "detail": str(call.get("temperature_note") or "")})
            notice["calls"] += 1
            if node_id not in notice["nodes"]:
                notice["nodes"].append(node_id)
    order = {r: k for k, r in enumerate(("plan", "code", "debug", "single"))}
    out = sorted(found.values(), key=lambda n: (order.get(n["role"], 9), n["model"], n["kind"]))
    for n in out:
        n["text"] = f"{n['role']} ran without its temperature {n['requested']:g}: {n['why']}"
    return out
