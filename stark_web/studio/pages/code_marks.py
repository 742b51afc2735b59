"""Line marks for the anchors view: the spans the plan agent asked to change in its skeleton, and the
lines of the filled candidate that implement them (what was asked vs what was done)."""

from __future__ import annotations

import difflib

from search.engine.anchors import MARKER_RE, AnchorError, parse_anchors
from search.engine.grounding import align

# A mark is {"from": line, "to": line, "cls": css class, "title": hover text}, lines 1-based inclusive
# (the shape static/js/code.js reads from data-marks).


def skeleton_marks(anchored_source: str | None) -> tuple[list[dict], str | None]:
    """Marks for the anchored skeleton: marker lines and span bodies; (marks, error) when it does not parse."""
    if not anchored_source:
        return [], None
    try:
        anchors = parse_anchors(anchored_source)
    except AnchorError as exc:
        return [], str(exc)
    marks: list[dict] = []
    for a in anchors:
        title = f"span {a.index + 1}: {a.instruction}"
        marks.append({"from": a.begin_line, "to": a.begin_line, "cls": "anchor-marker", "title": title})
        if a.end_line - a.begin_line > 1:
            marks.append({"from": a.begin_line + 1, "to": a.end_line - 1, "cls": "anchor", "title": title})
        marks.append({"from": a.end_line, "to": a.end_line, "cls": "anchor-marker", "title": title})
    return marks, None


def filled_marks(anchored_source: str | None, source: str, instructions: list[str] | None = None) -> list[dict]:
    """Marks for the filled candidate: the lines that fill each span and the additions the grounding contract
    allowed outside them (search.engine.grounding.align); for a file that breaks the contract, the lines that
    differ from the skeleton (markers removed), each named after the nearest span."""
    if not anchored_source or not source:
        return []
    try:
        grounded = align(anchored_source, source, instructions)
    except AnchorError:
        grounded = None
    if grounded is not None and not grounded.violations:
        anchors = parse_anchors(anchored_source)
        texts = list(instructions or []) if len(instructions or []) == len(anchors) else [a.instruction for a in anchors]
        marks = [{"from": f.first, "to": f.last, "cls": "filled",
                  "title": "; ".join(f"fills span {s + 1}: {texts[s]}" for s in f.spans)}
                 for f in grounded.fills if f.first <= f.last]
        marks += [{"from": a.first, "to": a.last, "cls": "filled-allowed",
                   "title": f"allowed outside the spans: {a.describe()}"} for a in grounded.allowed]
        return sorted(marks, key=lambda m: m["from"])
    skeleton = anchored_source.splitlines()
    try:
        anchors = parse_anchors(anchored_source)
    except AnchorError:
        anchors = []
    # For every kept (non-marker) skeleton line: which span it belongs to, if any.
    kept: list[str] = []
    span_of: list[int | None] = []
    for no, line in enumerate(skeleton, start=1):
        if MARKER_RE.search(line):
            continue
        kept.append(line.rstrip())
        span_of.append(next((a.index for a in anchors if a.begin_line < no < a.end_line), None))
    filled = [ln.rstrip() for ln in source.splitlines()]
    marks: list[dict] = []
    matcher = difflib.SequenceMatcher(a=kept, b=filled, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag not in ("replace", "insert") or j2 <= j1:
            continue
        near = [s for s in span_of[max(0, i1 - 1):i2 + 1] if s is not None]
        title = f"fills span {near[0] + 1}: {anchors[near[0]].instruction}" if near else "changed outside the spans"
        marks.append({"from": j1 + 1, "to": j2, "cls": "filled", "title": title})
    return marks
