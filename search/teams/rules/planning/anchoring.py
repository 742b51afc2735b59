"""Turn a move into grounded instructions: the spans of the current candidate that the move changes (the
hunks of a line diff against the rendered result) are wrapped in IMPROVE anchors, and the code role fills
each span with that hunk's new lines. Both roles compute the same hunks, so they always agree. A hunk that only
adds or removes blank lines (or trailing spaces) is no change under the grounding contract
(search.engine.grounding) and gets no span."""

from __future__ import annotations

import difflib
import re
from functools import lru_cache

from search.engine.anchors import parse_anchors, wrap_lines

KERNELS_TITLE = "# Generated kernels"  # the section titles of a rendered candidate (search.teams.rules.rendering.candidate)
MODEL_TITLE = "# Optimized model"
HEADER_START = "# Candidate for "  # the first line of the header comment, below the reference
MERGE_GAP = 2  # hunks separated by this many unchanged lines or fewer become one span
TAG = re.compile(r"\[rules: ([^\]]*)\]\s*$")


@lru_cache(maxsize=8)
def diff_hunks(old: str, new: str) -> tuple[tuple[int, int, tuple[str, ...]], ...]:
    """(first, last, new_lines) per changed span of old, 1-based inclusive; first > last is an insertion
    before line `first`. Cached: the planner anchors a move and the code role fills it from the same hunks."""
    a, b = old.splitlines(), new.splitlines()
    hunks: list[list[int]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if hunks and i1 - hunks[-1][1] <= MERGE_GAP:
            hunks[-1][1], hunks[-1][3] = i2, j2
        else:
            hunks.append([i1, i2, j1, j2])
    return tuple((i1 + 1, i2, tuple(b[j1:j2])) for i1, i2, j1, j2 in hunks if _plain(a[i1:i2]) != _plain(b[j1:j2]))


def _plain(lines: list[str]) -> list[str]:
    return [ln.rstrip() for ln in lines if ln.strip()]


def where(old: str, first: int) -> str:
    """Which part of a rules candidate a span is in, in words."""
    lines = old.splitlines()
    kernels = next((k + 1 for k, ln in enumerate(lines) if ln.startswith(KERNELS_TITLE)), None)
    model = next((k + 1 for k, ln in enumerate(lines) if ln.startswith(MODEL_TITLE)), None)
    if kernels is None or model is None:
        return ("below the reference, replace the ModelNew stub with the generated part: header, kernels and "
                "ModelNew(Model) with the traced forward")
    header = next((k + 1 for k, ln in enumerate(lines) if ln.startswith(HEADER_START)), 0)
    if header <= first < kernels:
        return "record the move in the header"
    if first < model:
        return "write the kernels here"
    return "apply it in ModelNew"


def anchor(old: str, new: str, instruction: str, tag: str, short: str = "") -> tuple[str, list[str]]:
    """The anchored old source and one instruction per span (each ending with the machine tag): the full
    instruction on the first span, a short reminder of the same move on the others."""
    hunks = diff_hunks(old, new)
    if not hunks:
        raise ValueError("the move changes nothing")
    spans, instructions = [], []
    for k, (first, last, _) in enumerate(hunks, start=1):
        head = instruction if k == 1 or not short else f"Same move ({short})"
        text = f"{head} (part {k}/{len(hunks)}: {where(old, first)}) [rules: {tag}]"
        spans.append((first, last, text))
        instructions.append(text)
    return wrap_lines(old, spans), instructions


def fill(anchored: str, old: str, new: str) -> str:
    """The code role's answer: each span replaced by its hunk of new; checked to reproduce new (blank lines and
    trailing spaces aside: the hunks that change only those have no span), which it returns."""
    filled = replace_spans(anchored, [list(lines) for _, _, lines in diff_hunks(old, new)])
    if _plain(filled.splitlines()) != _plain(new.splitlines()):
        raise ValueError("the anchored spans do not match the planned change")
    return new


def replace_spans(anchored: str, fills: list[list[str]]) -> str:
    """Each span, markers included, replaced by its lines (kept verbatim, blank lines too)."""
    anchors = parse_anchors(anchored)
    if len(fills) != len(anchors):
        raise ValueError(f"{len(anchors)} span(s) but {len(fills)} planned change(s)")
    lines = anchored.splitlines()
    out: list[str] = []
    k = 0
    for a, new_lines in zip(anchors, fills):
        out += lines[k:a.begin_line - 1] + new_lines
        k = a.end_line
    out += lines[k:]
    return "\n".join(out) + ("\n" if anchored.endswith("\n") else "")


def tag_of(instruction: str) -> str | None:
    m = TAG.search(instruction)
    return m.group(1).strip() if m else None
