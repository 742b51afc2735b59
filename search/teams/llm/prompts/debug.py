"""Debug agent prompt, v2: minimally fix a failed candidate, given its errors and its siblings."""

from __future__ import annotations

from search.engine.agents import CodeAnswer, ContextWindow
from search.engine.anchors import BEGIN, END
from search.teams.llm.prompts.common import rejection_note, system_prompt, whole_file_answer

VERSION = "debug/3"

ROLE = (
    "Your role: the DEBUG agent. Node i failed: it did not build, crashed, timed out, was incorrect or "
    "was rejected by the integrity checks; its verdict, reasons and logs are shown. Make the MINIMAL "
    "change that fixes the failure while keeping its optimization. Siblings of i (other attempts from "
    "the same parent) are shown for reference: one may have solved the same problem. The logs are cut to what "
    "concerns the candidate: its own traceback frames (in `candidate.py`, numbered as node i's source), the "
    "exception, and the compiler's errors; the harness's and libraries' frames are left out."
)

FORMAT = f"""Answer format (machine-checked; an answer that breaks it is rejected):
Optionally one or two sentences naming the bug, then the COMPLETE fixed file in ONE fenced ```python
block. No {BEGIN}/{END} markers, no other code block."""


def user_prompt(window: ContextWindow, token_budget: int | None, previous_error: str | None = None,
                quoted: str = "") -> str:
    return (window.render(token_budget) + "\n\n"
            f"Task: fix node {window.target.id} with a minimal change and return the complete file."
            + rejection_note(window, previous_error, quoted))


def system(window: ContextWindow, target: str) -> str:
    return system_prompt(ROLE, FORMAT, window, target)


def parse(text: str, window: ContextWindow) -> CodeAnswer:
    return whole_file_answer(text, window, f"the fixed file still contains {BEGIN}/{END} markers; remove them",
                             "the answer is identical to the failed file; change what caused the failure")
