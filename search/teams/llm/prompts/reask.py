"""The re-ask's quote of the rejected lines: when the engine re-asks a malformed or ungrounded answer, the reason it
gives (search.engine.grounding, search.engine.anchors, the prompts' parsers) names lines by number; the re-ask
shows those lines of the rejected answer once each, numbered, so the model sees exactly what it wrote there.

Line numbers are those of the answer's code block (the one holding the candidate), as the checks count them:
- "your line N", "your lines A-B", "(line N)", "(lines A-B)": the rejected file (code, debug, single agents);
- for the plan agent, whose block is the skeleton: "skeleton line N" and the anchor parser's "line N: ...";
- a reason about markers left in the file: the lines holding a marker.
An answer with no usable code block (cut off, no fence, no ModelNew) is quoted by its first (or, when cut off, its
last) lines. At most MAX_QUOTED lines are quoted.
"""

from __future__ import annotations

import re

from search.engine.anchors import MARKER_RE
from search.teams.llm.prompts.common import candidate_block

MAX_QUOTED = 12
MAX_WIDTH = 200  # a quoted line longer than this is cut
FILE_LINES = (re.compile(r"\byour lines? (\d+)(?:-(\d+))?"), re.compile(r"\(lines? (\d+)(?:-(\d+))?\)"))
SKELETON_LINES = (re.compile(r"\bskeleton line (\d+)()"), re.compile(r"(?:^|: |; )line (\d+)(): "))
MARKERS = re.compile(r"\bmarkers?\b.*\b(left|still|contains?)\b|\b(still )?contains? .*markers?", re.IGNORECASE)


def named_lines(message: str, source: str, role: str) -> list[int]:
    """The 1-based lines of `source` (the rejected code block) that `message` names, in order, each once."""
    count = len(source.splitlines())
    found: list[int] = []
    patterns = FILE_LINES + (SKELETON_LINES if role == "plan" else ())
    for pattern in patterns:
        for m in pattern.finditer(message):
            first = int(m.group(1))
            last = int(m.group(2)) if m.group(2) else first
            found += range(first, min(last, count) + 1)
    if MARKERS.search(message) and "no span is marked" not in message:
        found += [no for no, line in enumerate(source.splitlines(), start=1) if MARKER_RE.search(line)]
    return sorted({no for no in found if 1 <= no <= count})


def _line(no: int, text: str) -> str:
    text = text.rstrip()
    return f"{no:>5} | {text if len(text) <= MAX_WIDTH else text[:MAX_WIDTH] + '…'}"


def quote_rejected(message: str, answer: str, role: str, most: int = MAX_QUOTED) -> str:
    """The rejected lines `message` names in `answer` (the model's whole answer), quoted once each with their
    numbers, at most `most`; "" when it names none."""
    if not message or not answer:
        return ""
    try:
        source = candidate_block(answer, check_syntax=False)
    except ValueError:
        text = [(no, t) for no, t in enumerate(answer.splitlines(), start=1) if t.strip()]
        cut = answer.count("```") % 2 == 1
        if not text:
            return ""
        shown = text[-min(most, 6):] if cut else text[:min(most, 6)]
        where = "end" if cut else "start"
        return (f"The {where} of your rejected answer (its lines {shown[0][0]}-{shown[-1][0]}):\n```text\n"
                + "\n".join(_line(no, t) for no, t in shown) + "\n```")
    numbers = named_lines(message, source, role)
    if not numbers:
        return ""
    lines = source.splitlines()
    shown_numbers = numbers[:most]
    out: list[str] = []
    for k, no in enumerate(shown_numbers):
        if k and no != shown_numbers[k - 1] + 1:
            out.append("  ...")
        out.append(_line(no, lines[no - 1]))
    more = len(numbers) - len(shown_numbers)
    tail = f"\n({more} more named line(s) not shown)" if more else ""
    return ("The lines of your rejected answer named above, numbered as in its code block:\n```text\n"
            + "\n".join(out) + "\n```" + tail)
