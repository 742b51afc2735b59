"""Code agent prompt, v3: implement every anchored instruction inside its span and return the complete file, no
markers; outside the spans only the grounding allowance (search.engine.grounding) may be added. The engine checks
the answer against the skeleton (search.engine.grounding.check_filled) and re-asks with the lines it names."""

from __future__ import annotations

from search.engine.agents import CodeAnswer, ContextWindow, MalformedAnswer, PlanAnswer
from search.engine.anchors import BEGIN, END, AnchorError, parse_anchors
from search.teams.llm.prompts.common import candidate_block, rejection_note, system_prompt

VERSION = "code/4"

ROLE = (
    "Your role: the CODE agent. The plan agent marked spans of node i's source and wrote one "
    "instruction per span. Implement every instruction faithfully and correctly by rewriting the lines "
    "inside its span. Every line outside the spans stays exactly as it is; the only additions allowed outside "
    "them are new imports, new module-level functions or classes, assignments to new module-level names (e.g. a "
    "kernel source string and its load_inline handle) and comments, placed between top-level statements. "
    "Every span must change. Learn from the attempts shown: what compiled, what was correct, what was fast, "
    "and which errors to avoid."
)

FORMAT = f"""Answer format (machine-checked; an answer that breaks it is rejected):
Return the COMPLETE new file in ONE fenced ```python block: every span replaced by its
implementation, every line outside the spans unchanged (whitespace aside), and no {BEGIN} or {END}
marker left anywhere. No other code block. The file is compared with the anchored source line by line;
a change outside the spans, or a span left as it was, is rejected with the lines named."""


def user_prompt(window: ContextWindow, plan: PlanAnswer, token_budget: int | None,
                previous_error: str | None = None,
                quoted: str = "") -> str:
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
    return "\n".join(lines) + rejection_note(window, previous_error, quoted)


def system(window: ContextWindow, target: str) -> str:
    return system_prompt(ROLE, FORMAT, window, target)


def parse(text: str, plan: PlanAnswer) -> CodeAnswer:
    """The file in the answer; the engine then checks it against the plan's skeleton (the grounding contract)."""
    try:
        source = candidate_block(text)
    except ValueError as exc:
        raise MalformedAnswer(str(exc), text=text) from None
    return CodeAnswer(source=source, text=text)
