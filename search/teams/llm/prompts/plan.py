"""Plan agent prompt, v4: propose one grounded optimization as anchored spans plus one instruction each.

Answer format: `INSTRUCTION k: ...` lines (one per span, in order), then the complete current file in
one fenced block with each span to change wrapped in `# <<<IMPROVE BEGINS>>>` / `# <<<IMPROVE ENDS>>>`.
"""

from __future__ import annotations

import re

from search.engine.agents import ContextWindow, MalformedAnswer, PlanAnswer
from search.engine.anchors import BEGIN, END, AnchorError, resolve_instructions
from search.teams.llm.prompts.common import candidate_block, rejection_note, system_prompt

VERSION = "plan/5"

ROLE = (
    "Your role: the PLAN agent. Study node i (its source, its measured runtime and speed-ups), the "
    "reference, what its children already tried and what the fastest nodes so far did. Propose the "
    "single most promising next optimization for node i, grounded in its code: mark exactly where the "
    "code must change and say precisely what to do there. You do not write the new code yourself; a "
    "code agent implements your instructions. Do not repeat an idea that a child of i already tried "
    "unless you fix why it failed, nor what an attempt in flight from node i is already trying (shown as "
    "'being tried'): parallel attempts must diverge. Use several spans when the change touches several "
    "places (e.g. "
    "one at module level for the kernel source, one in `ModelNew.forward` to call it). When node i "
    "is the reference itself (ModelNew merely subclasses Model), leave `Model` as it is and mark "
    "spans in or around ModelNew; an empty span marks where new code is to be inserted."
)

FORMAT = f"""Answer format (machine-checked; an answer that breaks it is rejected):
1. At most a few sentences of reasoning.
2. One line per span, in the order the spans appear in the file:
   INSTRUCTION 1: <what to change in span 1, concrete and self-contained>
   INSTRUCTION 2: <...>
3. The COMPLETE source of node i in ONE fenced ```python block, unchanged except that each region to
   rewrite is wrapped in marker lines, each marker alone on its own comment line (the engine checks that
   removing the marker lines gives node i's source line for line, trailing spaces and blank lines aside;
   the code agent may change only the lines inside the spans):
   # {BEGIN}
   ...the existing lines to rewrite (may be empty to mark an insertion point)...
   # {END}
   Spans are balanced, never nested, at least one. Markers inside a C++/CUDA string use `// ` instead
   of `# `."""

INSTRUCTION_RE = re.compile(r"^\W{0,4}INSTRUCTION\s*(\d+)\s*\W{0,3}[:.)\-]\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def user_prompt(window: ContextWindow, token_budget: int | None, previous_error: str | None = None,
                quoted: str = "") -> str:
    return (window.render(token_budget) + "\n\n"
            f"Task: propose the next optimization of node {window.target.id} in the answer format: "
            "INSTRUCTION lines, then the complete anchored file in one fenced block."
            + rejection_note(window, previous_error, quoted))


def system(window: ContextWindow, target: str) -> str:
    return system_prompt(ROLE, FORMAT, window, target)


def parse_instructions(text: str) -> list[str]:
    """The numbered INSTRUCTION lines outside code blocks, ordered by their number."""
    outside = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    found: dict[int, str] = {}
    for m in INSTRUCTION_RE.finditer(outside):
        found.setdefault(int(m.group(1)), m.group(2).strip().strip("*").strip())
    return [found[k] for k in sorted(found)]


def parse(text: str) -> PlanAnswer:
    """Check the answer with the engine's anchor rules; MalformedAnswer names what to fix."""
    try:
        source = candidate_block(text)
    except ValueError as exc:
        raise MalformedAnswer(str(exc), text=text) from None
    instructions = parse_instructions(text)
    try:
        anchors = resolve_instructions(source, instructions or None)
    except AnchorError as exc:
        raise MalformedAnswer(f"bad anchors: {exc}", text=text) from None
    return PlanAnswer(anchored_source=source, instructions=[a.instruction for a in anchors], text=text)
