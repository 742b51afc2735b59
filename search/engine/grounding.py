"""The grounding contract: a plan's skeleton is node i's source plus marker lines, and the code agent's file is the
skeleton with only its spans rewritten (plus a small, recorded allowance). Checked by the engine for every team
(search.engine.expand); each violation names the line(s) and what to do.

Lines are compared whitespace-insensitively: trailing whitespace (a CR of CRLF included) and blank lines are
ignored; indentation and everything else count.

1. Skeleton: the anchored source with its marker lines removed equals node i's source (check_skeleton).
2. Filled file (align / check_filled): every line of the skeleton outside the spans ("fixed" lines) appears in the
   file, in order, unchanged. The file lines between two fixed lines that enclose a span are that span's fill;
   new lines anywhere else are allowed only when they are, as a whole, new module-level definitions inserted
   between two top-level statements of the skeleton: `import`/`from` lines, `def`/`class` blocks, assignments to
   plain names (a kernel's source string, a `load_inline(...)` handle, a constant), and comments, judged by their
   effect at import: none may rebind, patch or shadow what the skeleton binds or its fixed lines use (builtins
   included), run code beyond building values and extensions, or decorate beyond kernel decorators (an import may
   repeat one the skeleton imports); search.engine.allowance and search.engine.effects decide. What was allowed is returned (Alignment.allowed) and recorded on the node's
   agent log.
   A fill of a span inside a block (its BEGIN marker indented) that leaves the block (from the first line that
   starts a top-level statement on) is module-level code, judged by its effect as the allowance judges added
   lines, except that it may redefine what the spans defined.
3. Every span changed: its fill differs from its body (whitespace-insensitively; an empty insertion span needs at
   least one line). Spans with no fixed line between them are judged together, except that one at either end whose
   body still starts (ends) their joint fill is named unchanged.

The alignment is a dynamic programme over (fixed line, file line): all fixed lines matched in order when possible,
then as few new lines outside the spans as possible, so lines that could be either count as the spans' fills.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache, partial

from search.engine.alignment import match_lines
from search.engine.allowance import ALLOWANCE, Allowed, Facts, allowed, module_facts, show
from search.engine.anchors import BEGIN, END, MARKER_RE, Anchor, AnchorError, has_markers, parse_anchors
from search.engine.source_ast import parse

MAX_REPORTED = 4
# Where str.splitlines breaks lines and Python does not (a form feed also resets Python's indentation): in a file
# with none of them, a line's number is Python's.
ODD_BREAKS = ("\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
SIMILAR = 0.6  # a changed fixed line is named with the file's new line when they are at least this similar
@dataclass
class Fill:
    """The file lines that fill a group of spans (one span, or adjacent spans judged together)."""

    spans: list[int]  # 0-based span indices
    first: int  # 1-based inclusive file lines; first > last: nothing there
    last: int
    changed: bool


@dataclass
class Alignment:
    fills: list[Fill] = field(default_factory=list)
    allowed: list[Allowed] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the node's log: where the spans were filled and what was allowed outside them."""
        spans = ", ".join(f"span {'+'.join(str(s + 1) for s in f.spans)} -> "
                          + (f"lines {f.first}-{f.last}" if f.first <= f.last else "removed") for f in self.fills)
        allowed = "; ".join(a.describe() for a in self.allowed) or "nothing"
        return f"grounding: {spans}; allowed outside the spans: {allowed}"


def _numbered(text: str) -> list[tuple[int, str]]:
    """(1-based line number, line without trailing whitespace) of every non-blank line."""
    return [(no, ln.rstrip()) for no, ln in enumerate(text.splitlines(), start=1) if ln.strip()]


def check_skeleton(anchored_source: str, source: str, node_id: int | None = None) -> None:
    """Raise AnchorError unless the anchored source, markers removed, is `source` (node i's), line for line."""
    parse_anchors(anchored_source)
    node = "node i" if node_id is None else f"node {node_id}"
    skel = [(no, t) for no, t in _numbered(anchored_source) if not MARKER_RE.search(t)]
    src = _numbered(source)
    a, b = [t for _, t in skel], [t for _, t in src]
    if a == b:
        return
    problems = []
    for tag, i1, _, j1, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace":
            problems.append(f"skeleton line {skel[i1][0]} {show(a[i1])} is line {src[j1][0]} {show(b[j1])} in "
                            f"{node}'s source")
        elif tag == "delete":
            problems.append(f"skeleton line {skel[i1][0]} {show(a[i1])} is not in {node}'s source")
        else:
            after = f"after skeleton line {skel[i1 - 1][0]}" if i1 > 0 else "at the top of the skeleton"
            problems.append(f"{node}'s line {src[j1][0]} {show(b[j1])} is missing {after}")
    more = f" (and {len(problems) - MAX_REPORTED} more)" if len(problems) > MAX_REPORTED else ""
    raise AnchorError(
        f"the skeleton is not {node}'s source with markers added: {'; '.join(problems[:MAX_REPORTED])}{more}. "
        f"Copy {node}'s source exactly (trailing spaces and blank lines may differ), add only the {BEGIN}/{END} "
        "marker lines, and say what to change in the instructions, not in the skeleton"
    )


@dataclass
class _Skeleton:
    fixed: list[tuple[int, str]]  # (skeleton line, text) of the non-blank lines outside the spans
    gap_spans: list[list[int]]  # gap j (before fixed j; gap len(fixed) is after the last): spans lying in it
    bodies: list[list[str]]  # per span: its body's non-blank lines, right-stripped
    anchors: list[Anchor]


def _skeleton(anchored_source: str, instructions: list[str] | None) -> _Skeleton:
    anchors = parse_anchors(anchored_source)
    if instructions and len(instructions) == len(anchors):
        for a, text in zip(anchors, instructions):
            a.instruction = text or a.instruction
    span_at = {}
    for a in anchors:
        for no in range(a.begin_line, a.end_line + 1):
            span_at[no] = a.index
    fixed: list[tuple[int, str]] = []
    gaps: list[list[int]] = [[]]
    for no, text in _numbered(anchored_source):
        if no in span_at:
            if span_at[no] not in gaps[-1]:
                gaps[-1].append(span_at[no])
            continue
        fixed.append((no, text))
        gaps.append([])
    bodies = [[t for _, t in _numbered(a.body)] for a in anchors]
    return _Skeleton(fixed, gaps, bodies, anchors)


def align(anchored_source: str, filled_source: str, instructions: list[str] | None = None) -> Alignment:
    """How the filled file maps onto the skeleton: each span group's fill, what was allowed outside the spans,
    and every violation of the contract (empty when the file is grounded). instructions (one per span) name the
    spans in messages when their markers carry none."""
    sk = _skeleton(anchored_source, instructions)
    numbered = _numbered(filled_source)
    lines = [t for _, t in numbered]
    raw = filled_source.splitlines()
    flags = [bool(gs) for gs in sk.gap_spans]
    match = match_lines([t for _, t in sk.fixed], flags, lines)
    # Each parses a whole file, when first needed: often never (spans filled at the top level, or inside a block
    # with no line that may start a top-level statement).
    facts = cache(partial(module_facts, anchored_source))
    tops = cache(partial(_top_level_starts, filled_source))
    odd_breaks = any(c in filled_source for c in ODD_BREAKS)
    result = Alignment()
    matched = [(j, i) for j, i in enumerate(match) if i is not None]
    bounds = [(-1, -1), *matched, (len(sk.fixed), len(lines))]
    for (j0, i0), (j1, i1) in zip(bounds, bounds[1:]):
        spans = [s for gap in sk.gap_spans[j0 + 1:j1 + 1] for s in gap]
        skipped = sk.fixed[j0 + 1:j1]
        new = numbered[i0 + 1:i1]
        first = new[0][0] if new else (numbered[i0][0] + 1 if i0 >= 0 else 1)
        last = new[-1][0] if new else first - 1
        result.violations += _changed(skipped, new)
        if spans and new and not skipped and j0 >= 0:
            head = _attached(new, numbered[i0][0], sk, anchored_source, j0, spans[0])
            if head:
                result.violations += _outside(head, raw, sk, j0, facts(), result, after=True)
                new = new[len(head):]
                first = new[0][0] if new else head[-1][0] + 1
                last = new[-1][0] if new else first - 1
        if spans and new and not skipped:
            result.violations += _escaped(new, tops, raw, anchored_source, sk, spans, facts, odd_breaks)
        if spans:
            fill_lines = [t for _, t in new]
            result.fills.append(Fill(spans, first, last, True))
            if skipped:
                continue
            for s in _unchanged(spans, [sk.bodies[s] for s in spans], fill_lines):
                result.fills[-1].changed = False
                result.violations.append(f"span {s + 1} (skeleton line {sk.anchors[s].begin_line}: "
                                         f"{sk.anchors[s].instruction or 'no instruction'}) is unchanged in your "
                                         f"file ({f'lines {first}-{last}' if first <= last else 'nothing there'}); "
                                         "implement its instruction")
        elif new and not skipped:
            result.violations += _outside(new, raw, sk, j1, facts(), result)
    return result


def _changed(skipped: list[tuple[int, str]], new: list[tuple[int, str]]) -> list[str]:
    """A violation per fixed line the file changed or removed, with the file's most similar new line, if any."""
    out = []
    for no, text in skipped[:MAX_REPORTED]:
        ratios = [(difflib.SequenceMatcher(None, text, other, autojunk=False).ratio(), at, other) for at, other in new]
        best = max(ratios, default=(0.0, 0, ""))
        if best[0] >= SIMILAR:
            shown = (repr(text), repr(best[2])) if text.strip() == best[2].strip() else (show(text), show(best[2]))
            out.append(f"skeleton line {no} {shown[0]} is outside every span but your file changes it to {shown[1]} "
                       f"(line {best[1]})")
        else:
            out.append(f"skeleton line {no} {show(text)} is outside every span but your file removes or replaces it")
    return out


def _unchanged(spans: list[int], bodies: list[list[str]], fill: list[str]) -> list[int]:
    """The spans of a group (spans with no fixed line between them) whose fill leaves them as they were: all of
    them when the fill is their bodies; else those at the group's ends whose body starts (ends) the fill."""
    if fill == [t for b in bodies for t in b]:
        return list(spans)
    out = []
    lo, hi = 0, len(spans)
    while hi - lo > 1 and bodies[lo] and fill[:len(bodies[lo])] == bodies[lo]:
        fill = fill[len(bodies[lo]):]
        out.append(spans[lo])
        lo += 1
    while hi - lo > 1 and bodies[hi - 1] and fill[len(fill) - len(bodies[hi - 1]):] == bodies[hi - 1]:
        fill = fill[:len(fill) - len(bodies[hi - 1])]
        out.append(spans[hi - 1])
        hi -= 1
    return sorted(out)


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def _attached(new: list[tuple[int, str]], after: int, sk: _Skeleton, anchored_source: str, j0: int,
              span: int) -> list[tuple[int, str]]:
    """The new lines that continue fixed line j0 rather than fill the span after it: when the skeleton has a blank
    line between them, the file's lines right after that fixed line (file line `after`), with no blank line
    between, indented deeper than the span's BEGIN marker (`self.x = 1` added after `super().__init__()`, above
    the blank line before a span that holds `forward`). They are judged as lines outside the spans."""
    skeleton = anchored_source.splitlines()
    begin = sk.anchors[span].begin_line
    if not any(not line.strip() for line in skeleton[sk.fixed[j0][0]:begin - 1]):
        return []
    marker = _indent(skeleton[begin - 1])
    head: list[tuple[int, str]] = []
    for no, text in new:
        if no != after + 1 + len(head) or _indent(text) <= marker:
            break
        head.append((no, text))
    return head


def _top_level_starts(source: str) -> set[int]:
    """The file lines where a top-level statement starts (its first decorator's line); none when it does not
    parse."""
    try:
        tree = parse(source)
    except (SyntaxError, ValueError):
        return set()
    return {min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", []))]) for stmt in tree.body}


def _may_start_top_level(text: str) -> bool:
    """Whether a top-level statement may start on this line of a file without ODD_BREAKS: one starts a line that
    is not indented (by spaces or tabs), or follows a `;`."""
    return not text.startswith((" ", "\t")) or ";" in text


def _escaped(new: list[tuple[int, str]], tops: Callable[[], set[int]], raw: list[str], anchored_source: str,
             sk: _Skeleton, spans: list[int], skeleton_facts: Callable[[], Facts | None],
             odd_breaks: bool) -> list[str]:
    """When the spans lie inside a block (the first BEGIN marker is indented), the fill's lines from the first one
    that starts a top-level statement to its end leave that block: module-level code, judged by its effect like
    the lines added outside the spans (`_p = setattr(...)` after a method's span), except that it may redefine
    what the spans themselves defined. A violation naming the line, or nothing."""
    if _indent(anchored_source.splitlines()[sk.anchors[spans[0]].begin_line - 1]) == 0:
        return []
    start = next((k for k, (no, text) in enumerate(new)
                  if (odd_breaks or _may_start_top_level(text)) and no in tops()), None)
    if start is None:
        return []
    facts = skeleton_facts()
    if facts is None:  # the skeleton does not parse as Python
        return []
    first, last = new[start][0], new[-1][0]
    bound = {name: what for name, what in facts.bound.items() if name not in facts.span_bound}
    _, _, why = allowed("\n".join(raw[first - 1:last]), bound, facts.used, first)
    if why is None:
        return []
    named = " + ".join(str(s + 1) for s in spans)
    return [f"your {_where(new[start:])} {'leaves' if first == last else 'leave'} the block that span {named} lies "
            f"in, so {'it is' if first == last else 'they are'} module-level code, and {why}; {ALLOWANCE}"]


def _where(new: list[tuple[int, str]]) -> str:
    first, last = new[0][0], new[-1][0]
    return f"line {first} {show(new[0][1])}" if first == last else f"lines {first}-{last} (from {show(new[0][1])})"


def _outside(new: list[tuple[int, str]], raw: list[str], sk: _Skeleton, next_fixed: int,
             facts: Facts | None, result: Alignment, after: bool = False) -> list[str]:
    """Check a run of new lines outside the spans against the allowance; record it when allowed. `after`: the lines
    follow fixed line next_fixed (they continue it) instead of preceding it."""
    first, last = new[0][0], new[-1][0]
    where = _where(new)
    why: str | None
    if facts is None:
        why = "the skeleton does not parse as Python, so nothing may be added outside its spans"
    else:
        at = sk.fixed[next_fixed][0] if next_fixed < len(sk.fixed) else None
        if at is not None and (at in facts.inside or after and at + 1 in facts.inside):
            why = f"they are inside the top-level statement that skeleton line {at} belongs to"
        else:
            kinds, names, why = allowed("\n".join(raw[first - 1:last]), facts.bound, facts.used, first)
            if why is None:
                result.allowed.append(Allowed(first, last, kinds, names))
                return []
    return [f"your {where} {'is' if first == last else 'are'} new and outside every span, and {why}; "
            f"{ALLOWANCE}: move the change into a span or leave the skeleton's lines as they are"]


def check_filled(anchored_source: str, filled_source: str, instructions: list[str] | None = None) -> Alignment:
    """The grounded filled file's alignment; AnchorError naming every violation (markers left, empty answer,
    lines outside the spans changed or added beyond the allowance, spans left unchanged)."""
    if has_markers(filled_source):
        raise AnchorError(
            f"the answer still contains {BEGIN}/{END} markers; return the complete code with every marker removed"
        )
    if not filled_source.strip():
        raise AnchorError("the answer is empty; return the complete candidate source")
    result = align(anchored_source, filled_source, instructions)
    if result.violations:
        more = f" (and {len(result.violations) - MAX_REPORTED} more)" if len(result.violations) > MAX_REPORTED else ""
        raise AnchorError("the answer does not follow the anchored skeleton: "
                          + "; ".join(result.violations[:MAX_REPORTED]) + more
                          + ". Keep every line outside the spans as it is in the skeleton and rewrite each span")
    return result
