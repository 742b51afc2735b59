"""What the parent decodes from a child's result channel is bounded (kernels.parent.isolation.watch.MessageLimits): the
size of one message, its depth, the values in it and in all the messages kept; a line nested past the decoder's
recursion is a forgery, never a crash of the parent."""

from __future__ import annotations

import json

from kernels.parent.isolation.watch import MessageLimits, count_values, measure
from kernels.parent.isolation.worker_run import WorkerRun, authenticate


def test_a_message_over_the_byte_cap_is_named() -> None:
    limits = MessageLimits(max_bytes=1000, max_elements=10_000)
    assert limits.line_problem(b"[" + b"1," * 400 + b"1]") is None
    problem = limits.line_problem(b"[" + b"1," * 600 + b"1]")
    assert problem and "more than" in problem and "result channel" in problem


def test_many_small_values_are_refused_before_they_are_decoded() -> None:
    limits = MessageLimits(max_bytes=1 << 20, max_elements=1000)
    line = ("[" + ",".join(["[]"] * 5000) + "]").encode()  # 15 kB that decodes to 5,000 lists
    problem = limits.line_problem(line)
    assert problem and "more than 1000 values" in problem


def test_commas_inside_strings_are_not_values() -> None:
    line = json.dumps({"nonce": "n", "type": "error", "traceback": "a, b, [c], {d}, " * 2000}).encode()
    assert count_values(line) == 4
    assert MessageLimits(max_bytes=1 << 20, max_elements=100).line_problem(line) is None


def test_a_list_of_a_few_thousand_floats_passes() -> None:
    message = {"type": "block", "times_ms": [0.123456789 * k for k in range(5000)], "warmup_ms": [1.0] * 100}
    limits = MessageLimits()
    assert limits.line_problem(json.dumps(message).encode()) is None
    assert limits.message_problem(message) is None


def test_depth_and_the_values_of_all_kept_messages_are_bounded() -> None:
    limits = MessageLimits(max_bytes=1 << 20, max_elements=1000, max_kept=2500)
    deep: list = []
    for _ in range(40):
        deep = [deep]
    assert "levels deep" in (limits.message_problem({"x": deep}) or "")
    fresh = MessageLimits(max_bytes=1 << 20, max_elements=1000, max_kept=2500)
    assert fresh.message_problem({"v": list(range(900))}) is None
    assert fresh.message_problem({"v": list(range(900))}) is None
    assert "in all" in (fresh.message_problem({"v": list(range(900))}) or "")
    assert measure({"a": [1, 2, {"b": 3}]}, 32) == (8, 4)  # keys count as values


def test_a_line_nested_past_the_decoders_recursion_is_a_forgery() -> None:
    run = WorkerRun()
    assert authenticate(b"[" * 100_000 + b"]" * 100_000, "n", run) is None
    assert run.forged_count == 1
