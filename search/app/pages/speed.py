"""The speed-up the pages show: what search.engine.verdict stored on the node (`speed`) and on the run (`verdict`).
No arithmetic here or in the browser (static/js/speed.js reads the same stored data): every view prints one figure
per attempt. docs/metrics.md says how each is made."""

from __future__ import annotations

from typing import Any

REFERENCE_FASTEST = "The reference is fastest: no attempt beat it"
NO_TRUSTWORTHY_WINNER = "No trustworthy winner"


def speed(node: Any) -> dict[str, Any] | None:
    """The node's stored figure {value, low, high, provenance, retimed, not_retimed, unstable, why, outcome, how,
    runtime_ms, reference_ms, roofline_pct, reused, class, text, short, reference}, or None."""
    return getattr(node, "speed", None) if node is not None else None


def text(s: dict[str, Any] | None) -> str:
    """'2.31× vs reference (1.9–2.8×)', '1.00× (the reference)', or '—'."""
    return "—" if s is None else str(s.get("text") or "—")


def short(s: dict[str, Any] | None) -> str:
    return "—" if s is None else str(s.get("short") or "—")


def faster(s: dict[str, Any] | None) -> bool:
    return s is not None and not s.get("reference") and float(s.get("value") or 0.0) > 1.0


CLASS_WORDS = {"custom_kernel": "custom kernel", "configuration": "compiler/library configuration",
               "reference_equivalent": "reference-equivalent", "reference": "the reference"}


def class_words(s: dict[str, Any] | None) -> str:
    return CLASS_WORDS.get(str((s or {}).get("class") or ""), "")
