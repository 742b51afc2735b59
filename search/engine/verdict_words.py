"""Every word the views say about the verdict (search.engine.verdict): the class of a win and why, the marks a figure
carries, ties, free attempts, a settling run's headline, the run's answer when no attempt won, and the bench tables'
"best attempt" and "ships" cells. The pages (stark_web/studio/pages/speed.py), the bundle, the bench tables
(search/bench_metrics.py, benchmarks/kb_table.py) and the browser read them from here: the browser's copy,
static/js/verdict_words.js, is generated from this module (`python -m search.engine.verdict_words_js`) and a test
fails when it is not current. Templates use `{name}` fields, filled the same way in Python (`fill`) and in the
browser."""

from __future__ import annotations

import re
from typing import Any

from search.engine.verdict import REFERENCE_KEPT, UNTRUSTED

REFERENCE_FASTEST = "The reference is fastest: no attempt beat it"
NO_TRUSTWORTHY_WINNER = "No trustworthy winner"
SETTLING_WHY = ("the search ended; its contenders are re-timed side by side with the reference, and the verdict is "
                "final once their figures are in")
SETTLING_IDLE = "Settling: the verdict is being settled"
SETTLING_PENDING = "Settling: re-timing {pending}"
PENDING_ITEM = "#{node} ({state})"
TIE_TITLE = "cannot be told apart from #{tie_with} beyond the noise of both figures: a tie"
TIE_NOTE = "a tie with {tied}: cannot be told apart beyond the noise"

# Attempts that do not spend the budget (search.engine.node FREE_VERDICTS, in that order; docs/metrics.md "Attempt")
FREE_WORDS = {"declined": "declined", "plan_rejected": "plan rejected", "exhausted": "nothing left to try"}

CLASS_WORDS = {"custom_kernel": "custom kernel", "configuration": "compiler/library configuration",
               "reference_equivalent": "reference-equivalent", "reference": "the reference"}
CLASS_WHY = {
    "custom_kernel": "its own CUDA/Triton/C++ code does the work",
    "configuration": "the win comes from a compiler or library setting (torch.compile, CUDA graphs, cuDNN flags, "
                     "layouts), not a kernel of its own",
    "reference_equivalent": "it computes the way the reference does: no kernel of its own and no configuration "
                            "change",
}
CLASS_TITLE = "class of win: {why}"

# The marks a figure carries, in the order shown: each when the figure's field `when` is set.
MARKS = (
    {"when": "unstable", "key": "unstable", "text": "unstable",
     "title": "{why}; re-time it before trusting this number"},
    {"when": "not_retimed", "key": "not-retimed", "text": "not re-timed",
     "title": "the search's figure: the run's contenders were re-timed side by side with the reference, this "
              "attempt was not"},
    {"when": "reused", "key": "reused", "text": "reused",
     "title": "the harness reused an earlier identical evaluation's result: not a measurement of its own"},
)

_FIELD = re.compile(r"\{(\w+)\}")


def fill(template: str, **values: Any) -> str:
    """A template with each {name} replaced by its value ("" when missing or None), as the browser's fill does."""
    return _FIELD.sub(lambda m: "" if values.get(m.group(1)) is None else str(values[m.group(1)]), template)


def tie_title(entry: dict[str, Any]) -> str:
    """The title of a tie mark: entry is search.engine.verdict.ordered's."""
    return fill(TIE_TITLE, tie_with=entry["tie_with"])


def tie_note(order: list[dict[str, Any]] | None, best: int | None) -> str:
    """'a tie with #7: cannot be told apart beyond the noise' when attempts share the best's rank
    (search.engine.verdict.ordered), else ''."""
    tied = [f"#{e['id']}" for e in order or () if e.get("tie_with") == best and best is not None]
    return fill(TIE_NOTE, tied=" and ".join(tied)) if tied else ""


def settling_text(pending: list[dict[str, Any]]) -> str:
    """A settling run's headline: what is pending, never a figure that may be withdrawn."""
    if not pending:
        return SETTLING_IDLE
    return fill(SETTLING_PENDING, pending=", ".join(fill(PENDING_ITEM, node=p["node"], state=p["state"])
                                                    for p in pending))


def class_words(s: dict[str, Any] | None) -> str:
    return CLASS_WORDS.get(str((s or {}).get("class") or ""), "")


def marks(s: dict[str, Any] | None, skip: tuple[str, ...] = ()) -> list[dict[str, str]]:
    """The marks a figure carries, in the order shown: MARKS, then the class of win of an attempt; each {key,
    text, title} (the class mark also {kind, class})."""
    if not s:
        return []
    out = [{"key": m["key"], "text": m["text"], "title": fill(m["title"], why=s.get("why"))}
           for m in MARKS if s.get(m["when"])]
    cls = str(s.get("class") or "")
    if not s.get("reference") and cls in CLASS_WHY:
        out.append({"key": "class", "kind": "class", "class": cls, "text": CLASS_WORDS[cls],
                    "title": fill(CLASS_TITLE, why=CLASS_WHY[cls])})
    return [m for m in out if m["key"] not in skip]


def best_words(record: dict[str, Any]) -> str:
    """A bench record's best attempt: '#3', '#3 (tie with #7)' when the verdict cannot tell them apart beyond the
    noise, or '—'."""
    if record.get("best") is None:
        return "—"
    tied = ", ".join(f"#{i}" for i in record.get("tied_with") or ())
    return f"#{record['best']}" + (f" (tie with {tied})" if tied else "")


def winner_words(record: dict[str, Any]) -> str:
    """What a bench record's run ships: "#<node>", "reference" (no attempt beat it), "none trustworthy" or "—"."""
    if record.get("winner") == REFERENCE_KEPT:
        return "reference (at the roofline)" if record.get("at_roofline") else "reference"
    if record.get("winner") == UNTRUSTED:
        return "none trustworthy"
    node = record.get("winner_node", record.get("best"))
    return "—" if node is None else f"#{node}"
