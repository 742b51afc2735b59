"""The speed-up the pages show: what search.engine.verdict stored on the node (`speed`) and on the run (`verdict`).
No arithmetic here or in the browser (static/js/speed.js reads the same stored data): every view prints one figure
per attempt. docs/metrics.md says how each is made."""

from __future__ import annotations

from typing import Any

REFERENCE_FASTEST = "The reference is fastest: no attempt beat it"
NO_TRUSTWORTHY_WINNER = "No trustworthy winner"
SETTLING_WHY = ("the search ended; its contenders are re-timed side by side with the reference, and the verdict is "
                "final once their figures are in")


FREE_WORDS = {"declined": "declined", "plan_rejected": "plan rejected", "exhausted": "nothing left to try"}


def tie_title(entry: dict[str, Any]) -> str:
    """The title of a tie mark (static/js/speed.js tieTitle): entry is search.engine.verdict.ordered's."""
    return f"cannot be told apart from #{entry['tie_with']} beyond the noise of both figures: a tie"


def tie_note(order: list[dict[str, Any]] | None, best: int | None) -> str:
    """'a tie with #7: cannot be told apart beyond the noise' when attempts share the best's rank
    (search.engine.verdict.ordered; static/js/speed.js tieNote), else ''."""
    tied = [f"#{e['id']}" for e in order or () if e.get("tie_with") == best and best is not None]
    return f"a tie with {' and '.join(tied)}: cannot be told apart beyond the noise" if tied else ""


def settling_text(pending: list[dict[str, Any]]) -> str:
    """A settling run's headline: what is pending, never a figure that may be withdrawn (static/js/speed.js
    settlingText says the same)."""
    if not pending:
        return "Settling: the verdict is being settled"
    return "Settling: re-timing " + ", ".join(f"#{p['node']} ({p['state']})" for p in pending)


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


CLASS_WORDS = {"custom_kernel": "custom kernel", "configuration": "compiler/library configuration",
               "reference_equivalent": "reference-equivalent", "reference": "the reference"}
CLASS_WHY = {
    "custom_kernel": "its own CUDA/Triton/C++ code does the work",
    "configuration": "the win comes from a compiler or library setting (torch.compile, CUDA graphs, cuDNN flags, "
                     "layouts), not a kernel of its own",
    "reference_equivalent": "it computes the way the reference does: no kernel of its own and no configuration "
                            "change",
}


def class_words(s: dict[str, Any] | None) -> str:
    return CLASS_WORDS.get(str((s or {}).get("class") or ""), "")


def marks(s: dict[str, Any] | None, skip: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """The marks a figure carries, in the order shown (static/js/speed.js marks says the same): unstable, not
    re-timed, reused, and the class of win of an attempt; each {key, kind, class, text, title}."""
    if not s:
        return []
    out = []
    if s.get("unstable"):
        out.append({"key": "unstable", "text": "unstable",
                    "title": f"{s.get('why') or ''}; re-time it before trusting this number"})
    if s.get("not_retimed"):
        out.append({"key": "not-retimed", "text": "not re-timed",
                    "title": "the search's figure: the run's contenders were re-timed side by side with the "
                             "reference, this attempt was not"})
    if s.get("reused"):
        out.append({"key": "reused", "text": "reused",
                    "title": "the harness reused an earlier identical evaluation's result: not a measurement of its "
                             "own"})
    cls = str(s.get("class") or "")
    if not s.get("reference") and cls in CLASS_WHY:
        out.append({"key": "class", "kind": "class", "class": cls, "text": CLASS_WORDS[cls],
                    "title": f"class of win: {CLASS_WHY[cls]}"})
    return [m for m in out if m["key"] not in skip]
