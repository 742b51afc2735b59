"""A rejected answer is re-asked with its offending lines quoted once (prompts/reask.py): through the real engine,
agents and the stub vendor server for a plan whose skeleton edits outside its spans, a fill that changes a line
outside the spans, and a debug fix that keeps the markers; and the quote itself, bounded, on answers by hand."""

from __future__ import annotations

import pytest

from search.engine.anchors import BEGIN, END
from search.teams.llm.prompts.reask import MAX_QUOTED, quote_rejected
from tests.llm.kernel_responder import BLOCK_RE, first_answer, plan_answer, role_of
from tests.llm.stub_server import Reply, StubLLMServer
from tests.llm.teams_support import add_failed_child, engine_for, options

GET_INPUTS = "    return [torch.randn(16, 256)]"


def number_of(source: str, line: str) -> int:
    return source.splitlines().index(line) + 1


@pytest.mark.slow
def test_a_fill_that_changes_a_line_outside_the_spans_is_reasked_quoting_it_once(stub: StubLLMServer,
                                                                                 results: dict) -> None:
    bad = "    return [torch.randn(16, 256) * 0]"
    answers: list[str] = []

    def edit(source: str) -> str:
        answers.append(source.replace(GET_INPUTS, bad))
        return answers[-1]

    stub.responder = first_answer("code", edit)
    engine = engine_for("stark", options(stub), results, [])
    child = engine.expand(0)
    assert child.status == "building" and child.reasks == 1
    reask = stub.requests[2].text
    assert role_of(stub.requests[2]) == "code"
    assert reask.count(bad) == 1  # verbatim, once: in the quote
    assert f"{number_of(answers[0], bad):>5} | {bad}" in reask
    assert "The lines of your rejected answer named above" in reask
    reason = engine.tree[child.id].agent_log.split("code: malformed answer: ")[1].split("\n")[0]
    assert reask.count(reason) == 1  # the reason is stated once (the window's feedback section)
    assert bad not in stub.requests[1].text  # the first code request quoted nothing


@pytest.mark.slow
def test_a_skeleton_that_edits_outside_its_spans_is_reasked_quoting_the_line_once(stub: StubLLMServer,
                                                                                  results: dict) -> None:
    bad = "    return [torch.randn(16, 256) + 1]"
    engine = engine_for("stark", options(stub), results, [])
    answer = plan_answer(engine.tree.root.source).replace(GET_INPUTS, bad)
    stub.push(Reply(answer))
    child = engine.expand(0)
    assert child.reasks == 1
    reask = stub.requests[1].text
    assert role_of(stub.requests[1]) == "plan" and reask.count(bad) == 1
    skeleton = BLOCK_RE.search(answer).group(1)  # type: ignore[union-attr]
    assert f"{number_of(skeleton, bad):>5} | {bad}" in reask


@pytest.mark.slow
def test_a_fix_that_keeps_markers_is_reasked_quoting_the_marker_lines(stub: StubLLMServer, results: dict) -> None:
    begin, end = f"        # {BEGIN}", f"        # {END}"

    def edit(source: str) -> str:
        lines = source.splitlines()
        at = max(k for k, line in enumerate(lines) if line.lstrip().startswith("def forward")) + 1
        return "\n".join(lines[:at] + [begin] + lines[at:at + 1] + [end] + lines[at + 1:]) + "\n"

    stub.responder = first_answer("debug", edit)
    engine = engine_for("stark", options(stub), results, [])
    failed = add_failed_child(engine, results)
    child = engine.expand(failed)
    assert child.role == "debug" and child.reasks == 1
    reask = stub.requests[-1].text
    assert role_of(stub.requests[-1]) == "debug"
    assert reask.count(begin) == 1 and reask.count(end) == 1
    # the debug window shows the failure's log cut to the candidate's own frames
    assert "kernel launch failed" in reask and "kernels/candidate_task.py" not in reask
    assert 'File "candidate.py"' in reask


FILE = "\n".join(f"line_{k} = {k}" for k in range(1, 41)) + "\nclass ModelNew:\n    pass\n"


def test_named_lines_are_quoted_once_each_in_order_and_bounded() -> None:
    answer = f"Here.\n```python\n{FILE}```\n"
    quote = quote_rejected("your line 7 'line_7 = 7' is new; skeleton line 3 is ... (line 7); your lines 9-10 "
                           "(from 'line_9 = 9') are new", answer, "code")
    assert quote.count("line_7 = 7") == 1 and "    7 | line_7 = 7\n  ...\n    9 | line_9 = 9\n   10 | line_10" in quote
    assert "line_3 = 3" not in quote  # a skeleton line of the code agent is the plan's, not the answer's
    many = quote_rejected("span 1 is unchanged in your file (lines 2-40)", answer, "code")
    assert sum(1 for line in many.splitlines() if " | " in line) == MAX_QUOTED
    assert f"({39 - MAX_QUOTED} more named line(s) not shown)" in many
    plan = quote_rejected("bad anchors: line 3: <<<IMPROVE ENDS>>> without a matching BEGIN; skeleton line 5 'x'",
                          answer, "plan")
    assert "    3 | line_3 = 3" in plan and "    5 | line_5 = 5" in plan
    assert quote_rejected("the answer is identical to node i", answer, "debug") == ""


def test_an_answer_without_a_usable_block_is_quoted_by_its_start_or_its_cut_off_end() -> None:
    prose = "\n".join(f"thought {k}" for k in range(1, 20))
    start = quote_rejected("the answer has no fenced code block", prose, "plan")
    assert "The start of your rejected answer" in start and "thought 1" in start and "thought 7" not in start
    cut = quote_rejected("the answer was cut off", f"Plan.\n```python\n{FILE}", "plan")
    assert "The end of your rejected answer" in cut and "    pass" in cut and "line_1 = 1" not in cut
