"""The speed-up the pages show: what search.engine.verdict stored on the node (`speed`) and on the run (`verdict`),
in the words of search.engine.verdict_words (the browser reads the same words from static/js/verdict_words.js,
generated from it). No arithmetic here or in the browser: every view prints one figure per attempt.
docs/metrics.md says how each is made."""

from __future__ import annotations

from typing import Any

from search.engine.verdict_words import (
    CLASS_WHY,
    CLASS_WORDS,
    FREE_WORDS,
    NO_TRUSTWORTHY_WINNER,
    REFERENCE_FASTEST,
    SETTLING_WHY,
    class_words,
    marks,
    settling_text,
    tie_note,
    tie_title,
)

__all__ = ["CLASS_WHY", "CLASS_WORDS", "FREE_WORDS", "NO_TRUSTWORTHY_WINNER", "REFERENCE_FASTEST", "SETTLING_WHY",
           "class_words", "faster", "marks", "settling_text", "short", "speed", "text", "tie_note", "tie_title"]


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
    """An attempt's figure that beats the reference: above 1.0 and measurable (search.engine.verdict: a figure that
    is not measurable on this host never decides; static/js/run_page.js drawBest says the same)."""
    return (s is not None and not s.get("reference") and float(s.get("value") or 0.0) > 1.0
            and s.get("measurable", True) is not False)
