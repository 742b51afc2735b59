"""Models that refused to stream in a run: the refused call is sent again without streaming, and every later call
to that model in the run starts without it (one refused request per model per run, never more).

OpenAI answers 400 "Your organization must be verified to stream this model" to unverified organisations (param
`stream`); gateways without streaming answer likewise. Each call record says what happened (`stream_requested`,
`streamed`, `stream_note`); `notices` gives the one line the run shows (the CLI's summary: "Streaming: ...").
`--no-stream` (run option `stream: false`) never asks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

from search.llm.settings import RoleSettings


class StreamMemory:
    """One run's streaming refusals, by (provider, base_url, model); shared by the run's clients (thread-safe)."""

    def __init__(self) -> None:
        self._refused: dict[tuple[str, str | None, str], str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def key(settings: RoleSettings) -> tuple[str, str | None, str]:
        return (settings.provider, settings.base_url, settings.model)

    def refused(self, settings: RoleSettings) -> str | None:
        """Why this model refused to stream earlier in the run, or None."""
        with self._lock:
            return self._refused.get(self.key(settings))

    def refuse(self, settings: RoleSettings, reason: str) -> bool:
        """Remember the refusal; True when it is the first for this model in the run."""
        with self._lock:
            first = self.key(settings) not in self._refused
            self._refused.setdefault(self.key(settings), reason)
            return first


def notices(usages: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per model whose calls went without the streaming they asked for, from the nodes' usage."""
    found: dict[str, dict[str, Any]] = {}
    for call in (c for usage in usages for c in (usage or {}).get("calls") or []):
        if call.get("stream_requested") and not call.get("streamed"):
            entry = found.setdefault(str(call.get("model")), {"calls": 0, "note": ""})
            entry["calls"] += 1
            entry["note"] = entry["note"] or str(call.get("stream_note") or "")
    return [f"Streaming: {model} was not streamed ({entry['calls']} call(s)): {entry['note']}"
            for model, entry in found.items()]
