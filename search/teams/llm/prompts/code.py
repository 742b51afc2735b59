"""Code agent prompt, v1: implement every anchored instruction and return the complete file, no markers."""

from __future__ import annotations

from search.engine.agents import CodeAnswer, ContextWindow, MalformedAnswer, PlanAnswer
from search.engine.anchors import BEGIN, END, AnchorError, check_filled, parse_anchors
from search.teams.llm.prompts.common import candidate_block, rejection_note, system_prompt

VERSION = "code/1"

ROLE = (
    "Your role: the CODE agent. The plan agent marked spans of node i's source and wrote one "
    "instruction per span. Implement every instruction faithfully and correctly, touching nothing "
    "else unless the change requires it (e.g. a helper kernel or an import). Learn from the attempts "
    "shown: what compiled, what was correct, what was fast, and which errors to avoid."
)

FORMAT = f"""Answer format (machine-checked; an answer that breaks it is rejected):
Return the COMPLETE new file in ONE fenced ```python block: every span replaced by its
implementation, and no {BEGIN} or {END} marker left anywhere. No other code block."""


def user_prompt(window: ContextWindow, plan: PlanAnswer, token_budget: int | None,
                previous_error: str | None = None) -> str:
    try:
        spans = parse_anchors(plan.anchored_source)
    except AnchorError:
        spans = []
    lines = [window.render(token_budget), "", "## The plan for node "
             f"{window.target.id}: anchored source"]
    lines.append(f"```python\n{plan.anchored_source.rstrip()}\n```")
    for k, text in enumerate(plan.instructions or [a.instruction for a in spans], start=1):
        lines.append(f"INSTRUCTION {k}: {text}")
    lines.append("\nTask: implement every instruction and return the complete file in one fenced block.")
    return "\n".join(lines) + rejection_note(previous_error)


def system(window: ContextWindow, target: str) -> str:
    return system_prompt(ROLE, FORMAT, window, target)


def parse(text: str, plan: PlanAnswer) -> CodeAnswer:
    try:
        source = candidate_block(text)
        check_filled(plan.anchored_source, source)
    except (ValueError, AnchorError) as exc:
        raise MalformedAnswer(str(exc), text=text) from None
    return CodeAnswer(source=source, text=text)
