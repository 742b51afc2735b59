"""A scripted "model" for the stub server that answers STARK prompts in the required formats.

It reads the real prompt the agents sent (the node's source, the plan's anchored source) and
answers like a careful but unimaginative model: the plan anchors the body of `forward`, the code
agent rewrites that span into an equivalent form, the debug and single agents make small edits.
Candidates stay correct, so a run through the real engine and evaluator completes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tests.llm.stub_server import RecordedRequest, Reply

BEGIN = "<<<IMPROVE BEGINS>>>"
END = "<<<IMPROVE ENDS>>>"
BLOCK_RE = re.compile(r"```python\n(.*?)\n```", re.DOTALL)


def role_of(request: RecordedRequest) -> str:
    text = request.text
    for marker, role in (("the PLAN agent", "plan"), ("the CODE agent", "code"),
                         ("the DEBUG agent", "debug"), ("you are the only agent", "single")):
        if marker in text:
            return role
    return "unknown"


def block_after(text: str, heading: str) -> str:
    at = text.find(heading)
    if at < 0:
        raise ValueError(f"prompt has no {heading!r}")
    match = BLOCK_RE.search(text, at)
    if match is None:
        raise ValueError(f"no python block after {heading!r}")
    return match.group(1)


def forward_body(lines: list[str]) -> tuple[int, int]:
    """0-based [first, last] lines of the body of the last `def forward` in the file."""
    starts = [k for k, line in enumerate(lines) if line.lstrip().startswith("def forward")]
    if not starts:
        raise ValueError("no forward method")
    k = starts[-1]
    indent = len(lines[k]) - len(lines[k].lstrip())
    first = k
    while not lines[first].rstrip().endswith(":"):  # a signature may span several lines
        first += 1
    first += 1
    last = first
    while last + 1 < len(lines) and (not lines[last + 1].strip()
                                     or len(lines[last + 1]) - len(lines[last + 1].lstrip()) > indent):
        last += 1
    while not lines[last].strip():
        last -= 1
    return first, last


def plan_answer(source: str) -> str:
    lines = source.splitlines()
    first, last = forward_body(lines)
    pad = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    anchored = (lines[:first] + [f"{pad}# {BEGIN}"] + lines[first:last + 1] + [f"{pad}# {END}"]
                + lines[last + 1:])
    body = "\n".join(anchored)
    return ("The forward pass is the hot path; fuse it into one kernel.\n"
            "INSTRUCTION 1: rewrite the body of forward as a single fused pass over the input\n"
            f"```python\n{body}\n```\n")


def code_answer(anchored: str) -> str:
    out = []
    for line in anchored.splitlines():
        if BEGIN in line:
            pad = line[: len(line) - len(line.lstrip())]
            out.append(f"{pad}# fused pass (stub code agent)")
        elif END not in line:
            out.append(line)
    return "Implemented the instruction.\n```python\n" + "\n".join(out) + "\n```\n"


def edit_answer(source: str, note: str) -> str:
    lines = source.splitlines()
    first, _ = forward_body(lines)
    pad = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    lines.insert(first, f"{pad}# {note}")
    return f"{note}.\n```python\n" + "\n".join(lines) + "\n```\n"


def kernel_responder(request: RecordedRequest) -> Reply:
    role = role_of(request)
    text = request.text
    try:
        if role == "plan":
            return Reply(plan_answer(block_after(text, "## the node you work on (i)")))
        if role == "code":
            return Reply(code_answer(block_after(text, "## The plan for node")))
        if role == "debug":
            return Reply(edit_answer(block_after(text, "## the node you work on (i)"), "minimal fix (stub debug agent)"))
        if role == "single":
            return Reply(edit_answer(block_after(text, "## the node you work on (i)"), "rewritten (stub single agent)"))
    except ValueError as exc:
        return Reply(f"I could not follow the prompt: {exc}")
    return Reply("I do not know what role I am playing.")


def first_answer(role: str, edit: Callable[[str], str]) -> Callable[[RecordedRequest], Reply]:
    """The kernel responder, except that `role`'s first answer has its file passed through edit."""
    seen = {"n": 0}

    def responder(request: RecordedRequest) -> Reply:
        reply = kernel_responder(request)
        if role_of(request) == role:
            seen["n"] += 1
            if seen["n"] == 1:
                source = BLOCK_RE.search(reply.text).group(1) + "\n"  # type: ignore[union-attr]
                reply.text = f"Done.\n```python\n{edit(source)}```\n"
        return reply

    return responder
