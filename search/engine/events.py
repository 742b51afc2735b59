"""Typed events the engine emits through an injected callback; the service adds `seq` and `run`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

EVENT_TYPES = (
    "node.created",   # data: the whole node (Node.to_dict())
    "node.status",    # data: {status}
    "node.result",    # data: {verdict, runtime_ms, speedup_vs_eager, speedup_vs_compile, reasons, result, speed}
    "node.speed",     # data: {speed}  a node's verdict figure changed (the reference was timed, a re-time landed)
    "node.stream",    # data: {role, text}  partial agent output
    "run.status",     # data: {status: "running"|"finished"|"failed"|"stopped", reason, best}
    "run.progress",   # data: {attempts, budget, in_flight, best, best_runtime_ms, best_speedup_vs_eager, cost_usd}
    "leaderboard",    # data: {nodes: [{id, runtime_ms, speedup_vs_eager, speedup_vs_compile}]}
    "agent.call",     # data: one Usage.calls entry plus {role, reask}
    "node.human",     # data: {who, at, action, detail} a human action on the node (search.engine.steering)
    "run.human",      # data: {who, at, action, detail, node_id?} a run-wide human action (a hint for every plan)
)


@dataclass
class Event:
    type: str
    node: int | None = None
    data: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in EVENT_TYPES:
            raise ValueError(f"unknown event type {self.type!r}; known: {EVENT_TYPES}")

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "node": self.node, "data": self.data}


Emit = Callable[[Event], None]


def ignore(event: Event) -> None:
    """The default emit: drop the event."""


class EventLog:
    """An emit callback that keeps every event (tests, the CLI's --events file)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def of_type(self, type_: str) -> list[Event]:
        return [e for e in self.events if e.type == type_]
