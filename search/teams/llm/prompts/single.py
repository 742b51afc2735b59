"""Single-agent prompt, v3 (baselines sampling, reflexion, search-single): one agent reads node i and
writes an improved complete candidate directly, with no plan/anchor hand-off; the same agent (same system
prompt, same temperature) fixes a failed candidate when the policy selects one."""

from __future__ import annotations

import re

from search.engine.agents import CodeAnswer, ContextWindow
from search.engine.anchors import BEGIN, END
from search.teams.llm.prompts.common import SINGLE_TASK, rejection_note, system_prompt, whole_file_answer

VERSION = "single/4"

ROLE = (
    "Your role: you are the only agent. Read node i (and the attempts shown), decide on the most "
    "promising optimization, and write the complete faster candidate yourself. When node i failed "
    "(its verdict, reasons and logs are shown), fix it yourself with a minimal change that keeps its "
    "optimization."
)

FORMAT = f"""Answer format (machine-checked; an answer that breaks it is rejected):
A few sentences naming the optimization, then the COMPLETE new file in ONE fenced ```python block
defining ModelNew. No {BEGIN}/{END} markers, no other code block."""


def user_prompt(window: ContextWindow, token_budget: int | None, instruction: str = "",
                previous_error: str | None = None,
                quoted: str = "") -> str:
    task = instruction.strip() or "write a faster, correct candidate"
    return (window.render(token_budget) + "\n\n"
            f"Task for node {window.target.id}: {task}. Return the complete file in one fenced block."
            + rejection_note(window, previous_error, quoted))


def fix_prompt(window: ContextWindow, token_budget: int | None, previous_error: str | None = None,
                quoted: str = "") -> str:
    """The same agent's task when node i failed: fix it, minimally."""
    return (window.render(token_budget) + "\n\n"
            f"Task for node {window.target.id}: it failed; fix it with a minimal change and return the complete "
            "file in one fenced block." + rejection_note(window, previous_error, quoted))


def reflect_prompt(window_text: str, node_id: int) -> str:
    """Reflexion: the same agent's reflection on node i's evaluated outcome, before its next attempt."""
    return (window_text + "\n\n"
            f"Task: before your next attempt, reflect on node {node_id}: what it tried, what its verdict, reasons, logs "
            "and timing show, and what the next attempt should do differently. Answer with the reflection only, in "
            "at most five sentences, without code.")


REFLECTION_CHARS = 1500  # the most a kept reflection holds (whole lines: it is cut on a line boundary)
_FENCED = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.MULTILINE | re.DOTALL)


def plain_reflection(text: str, most: int = REFLECTION_CHARS) -> str:
    """A reflection as Reflexion's memory keeps it: plain text on one line, its fenced code blocks (closed or cut
    off) and stray fences left out, its lines kept whole up to `most` characters (a first line longer than that is
    cut at a word), "…" when something was cut. No fence can reach a later prompt half open."""
    text = _FENCED.sub(" (code left out) ", text).replace("```", "").replace("~~~", "")
    lines = [" ".join(line.split()) for line in text.splitlines()]
    lines = [line for line in lines if line]
    kept: list[str] = []
    for line in lines:
        if len(" ".join([*kept, line])) > most:
            break
        kept.append(line)
    if not kept and lines:
        kept = [lines[0][:most].rsplit(" ", 1)[0]]
    cut = len(" ".join(kept)) < len(" ".join(lines))
    return " ".join(kept) + (" …" if cut else "")


def system(window: ContextWindow, target: str) -> str:
    return system_prompt(ROLE, FORMAT, window, target, task=SINGLE_TASK)


def parse(text: str, window: ContextWindow) -> CodeAnswer:
    return whole_file_answer(text, window, f"the file contains {BEGIN}/{END} markers; return plain code",
                             "the answer is identical to node i; change the code")

