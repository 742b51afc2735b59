"""Grounded instructions: spans wrapped in <<<IMPROVE BEGINS>>> … <<<IMPROVE ENDS>>> markers.

A marker occupies its whole line (usually inside a comment, `# <<<IMPROVE BEGINS>>> fuse the ReLU`);
text after a BEGINS marker on the same line is that span's instruction. Spans must be balanced,
non-nested and at least one; every span needs an instruction. What a skeleton and a filled answer must
satisfy beyond the markers (the grounding contract) is checked by search.engine.grounding.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BEGIN = "<<<IMPROVE BEGINS>>>"
END = "<<<IMPROVE ENDS>>>"
# Lenient on spacing and a missing S so near-misses are recognised (and then rejected or parsed), never ignored.
MARKER_RE = re.compile(r"<<<\s*IMPROVE\s+(BEGINS?|ENDS?)\s*>>>", re.IGNORECASE)
_TRAILING_JUNK = re.compile(r"^[\s:\-–—]+|[\s]*(\*/|-->|\"\"\"|''')?\s*$")


class AnchorError(ValueError):
    """An anchored source or a filled answer breaks the marker rules; the message says which line and how to fix it."""


@dataclass
class Anchor:
    """One span: line numbers are 1-based in the anchored source; body is the text between the markers."""

    index: int
    begin_line: int
    end_line: int
    body: str
    instruction: str


def has_markers(text: str) -> bool:
    return MARKER_RE.search(text) is not None


def _marker_kind(line: str) -> tuple[str, str] | None:
    """('begin'|'end', text after the marker) for a marker line, else None."""
    if "<<<" not in line:  # every marker starts so (MARKER_RE)
        return None
    found = list(MARKER_RE.finditer(line))
    if not found:
        return None
    if len(found) > 1:
        raise AnchorError(f"two markers on one line: {line.strip()!r}; put each marker on its own line")
    m = found[0]
    kind = "begin" if m.group(1).upper().startswith("BEGIN") else "end"
    rest = _TRAILING_JUNK.sub("", line[m.end():]).strip()
    return kind, rest


def parse_anchors(anchored_source: str) -> list[Anchor]:
    """The spans of an anchored source, checked: balanced, non-nested, at least one."""
    anchors: list[Anchor] = []
    lines = anchored_source.splitlines()
    open_at: int | None = None
    open_text = ""
    body: list[str] = []
    for no, line in enumerate(lines, start=1):
        kind = _marker_kind(line)
        if kind is None:
            if open_at is not None:
                body.append(line)
            continue
        what, rest = kind
        if what == "begin":
            if open_at is not None:
                raise AnchorError(
                    f"line {no}: {BEGIN} inside the span opened on line {open_at}; spans cannot nest, "
                    f"close the first with {END} before opening another"
                )
            open_at, open_text, body = no, rest, []
        else:
            if open_at is None:
                raise AnchorError(f"line {no}: {END} without a matching {BEGIN} before it")
            anchors.append(Anchor(len(anchors), open_at, no, "\n".join(body), open_text))
            open_at = None
    if open_at is not None:
        raise AnchorError(f"line {open_at}: {BEGIN} is never closed; add {END} after the span")
    if not anchors:
        raise AnchorError(f"no span is marked; wrap at least one span in {BEGIN} … {END}")
    return anchors


def resolve_instructions(anchored_source: str, instructions: list[str] | None = None) -> list[Anchor]:
    """Parse and attach one instruction to each span: from `instructions` (in span order) when given,
    else from the text after each BEGINS marker. Raises AnchorError when any span has none."""
    anchors = parse_anchors(anchored_source)
    given = [i.strip() for i in (instructions or []) if i is not None]
    if given:
        if len(given) != len(anchors):
            raise AnchorError(
                f"{len(anchors)} span(s) but {len(given)} instruction(s); give exactly one instruction per span"
            )
        for a, text in zip(anchors, given):
            a.instruction = text or a.instruction
    missing = [a.begin_line for a in anchors if not a.instruction]
    if missing:
        raise AnchorError(
            f"span(s) starting on line(s) {missing} have no instruction; write it after {BEGIN} on the same line"
        )
    return anchors


def strip_markers(anchored_source: str) -> str:
    """The anchored source as plain code: marker lines removed, everything else kept."""
    kept = [ln for ln in anchored_source.splitlines() if not MARKER_RE.search(ln)]
    return "\n".join(kept) + ("\n" if anchored_source.endswith("\n") else "")


def apply_fills(anchored_source: str, fills: list[str]) -> str:
    """Replace each span (markers included) with its fill, in order; the result has no marker."""
    anchors = parse_anchors(anchored_source)
    if len(fills) != len(anchors):
        raise AnchorError(f"{len(anchors)} span(s) but {len(fills)} fill(s); give one fill per span")
    lines = anchored_source.splitlines()
    out: list[str] = []
    k = 0
    for a, fill in zip(anchors, fills):
        out.extend(lines[k:a.begin_line - 1])
        if fill:
            out.extend(fill.rstrip("\n").split("\n"))
        k = a.end_line
    out.extend(lines[k:])
    result = "\n".join(out) + ("\n" if anchored_source.endswith("\n") else "")
    if has_markers(result):
        raise AnchorError("a fill contains a marker; fills must be plain code")
    return result


def wrap_lines(source: str, spans: list[tuple[int, int, str]], comment: str = "#") -> str:
    """Anchor the given 1-based inclusive line ranges [(first, last, instruction)], in any order, non-overlapping.

    Markers are written as comments indented like the span's first line; first > last marks an empty
    insertion point before line `first`."""
    lines = source.splitlines()
    ordered = sorted(spans, key=lambda s: s[0])
    for (a0, a1, _), (b0, _, _) in zip(ordered, ordered[1:]):
        if b0 <= a1:
            raise AnchorError(f"spans {a0}-{a1} and starting at {b0} overlap; anchor spans must not overlap")
    for first, last, instruction in reversed(ordered):
        if not (1 <= first <= len(lines) + 1) or last > len(lines):
            raise AnchorError(f"span {first}-{last} is outside the source (1-{len(lines)})")
        if not instruction.strip() or "\n" in instruction:
            raise AnchorError("each span needs a one-line instruction")
        ref = lines[first - 1] if first <= len(lines) else ""
        indent = ref[: len(ref) - len(ref.lstrip())]
        begin = f"{indent}{comment} {BEGIN} {instruction.strip()}"
        end = f"{indent}{comment} {END}"
        lines[first - 1:max(first - 1, last)] = [begin, *lines[first - 1:max(first - 1, last)], end]
    return "\n".join(lines) + ("\n" if source.endswith("\n") else "")


def find_lines(source: str, snippet: str) -> tuple[int, int]:
    """The 1-based inclusive line range of the first occurrence of a (multi-line) snippet."""
    at = source.find(snippet)
    if at < 0:
        raise AnchorError(f"snippet not found in the source: {snippet[:60]!r}")
    first = source.count("\n", 0, at) + 1
    last = first + snippet.rstrip("\n").count("\n")
    return first, last


def wrap_text(source: str, snippet: str, instruction: str, comment: str = "#") -> str:
    """Anchor the whole lines holding the first occurrence of snippet."""
    first, last = find_lines(source, snippet)
    return wrap_lines(source, [(first, last, instruction)], comment)


def wrap_all(source: str, instruction: str, comment: str = "#") -> str:
    """Anchor the entire source as one span (single-agent teams: rewrite everything)."""
    n = len(source.splitlines())
    return wrap_lines(source, [(1, n, instruction)], comment)
