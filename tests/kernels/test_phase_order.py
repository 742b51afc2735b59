"""The parent's clock of a harness child (kernels.parent.isolation.watch.Deadlines): phases only move forward through the
task's order, each phase's allowance is granted once, and the whole child is capped by the phases it reached."""

from __future__ import annotations

import json
import os

import pytest

from kernels.child.channel import Channel
from kernels.parent.isolation.watch import MARGIN_S, Deadlines
from kernels.parent.phases import CHILD_ORDER, child_order

BUILD_S, RUN_S = 30.0, 10.0
CANDIDATE = {"start": BUILD_S, "build": BUILD_S, "first_call": BUILD_S, "run": RUN_S, "timing": RUN_S,
             "recheck": RUN_S}


def clock(now: float = 0.0) -> Deadlines:
    return Deadlines({"queue": 3600.0, **CANDIDATE}, None, now, order=child_order("candidate"))


def test_a_step_back_is_refused_and_the_run_deadline_stands() -> None:
    deadlines = clock()
    for t, phase in enumerate(("build", "first_call", "run"), start=1):
        assert deadlines.enter(phase, float(t))
    # the red team's forgery once its run phase began: build, first_call, start (each with allowance left)
    for t, phase in ((4.0, "build"), (5.0, "first_call"), (6.0, "start")):
        assert deadlines.behind(phase)
        assert not deadlines.enter(phase, t)
    assert deadlines.phase == "run" and deadlines.expired_phase() == "run"
    assert deadlines.deadline() == pytest.approx(3.0 + RUN_S)  # the run deadline from when run began, no more


def test_the_whole_child_is_capped_by_the_phases_it_reached() -> None:
    deadlines = clock()
    assert deadlines.total_cap_s() == pytest.approx(BUILD_S + MARGIN_S)  # only "start" so far
    deadlines.enter("build", 1.0)
    deadlines.enter("first_call", 2.0)
    deadlines.enter("run", 3.0)
    assert deadlines.total_cap_s() == pytest.approx(3 * BUILD_S + RUN_S + MARGIN_S)  # not timing's nor recheck's


def test_a_phase_that_recurs_in_the_order_spends_one_allowance() -> None:
    deadlines = Deadlines({"start": 5.0, "run": 10.0, "timing": 10.0, "build": 30.0, "first_call": 30.0},
                          {"timing": 2}, 0.0, order=child_order("retime"))
    for t, phase in enumerate(("run", "timing", "build", "first_call", "timing"), start=1):
        assert deadlines.enter(phase, float(t)), phase
    assert deadlines.spent["timing"] == pytest.approx(1.0)
    assert deadlines.deadline() == pytest.approx(5.0 + 20.0 - 1.0)  # timing's allowance less what it spent before
    assert not deadlines.enter("build", 6.0)  # behind it now


@pytest.mark.parametrize("sequence", [
    # a candidate that builds first, and one that times the problem's reference before it builds
    ("start", "build", "run", "first_call", "run", "timing", "recheck", "fuzz", "profile"),
    ("start", "run", "timing", "build", "run", "first_call", "run", "timing", "recheck", "fuzz", "profile"),
])
def test_the_candidates_own_sequences_are_never_refused(sequence: tuple[str, ...]) -> None:
    budgets = {phase: 10.0 for phase in sequence}
    deadlines = Deadlines(budgets, None, 0.0, order=child_order("candidate"))
    for t, phase in enumerate(sequence[1:], start=1):
        assert not deadlines.behind(phase), (phase, deadlines.phase)
        deadlines.enter(phase, float(t))
    assert deadlines.phase == "profile"


def test_every_task_kind_starts_with_start() -> None:
    assert all(order[0] == "start" and "queue" not in order for order in CHILD_ORDER.values())
    assert child_order("unknown kind") is None


def test_waiting_for_the_device_between_phases_and_resuming_keep_the_phase() -> None:
    """The child's own "queue" (kernels.child.channel.Channel.on_wait) changes nothing on the parent's clock, and
    the phase it resumes is the one it was in: no step back, no fresh time."""
    read_fd, write_fd = os.pipe()
    try:
        channel = Channel(write_fd, "n")
        channel.phase("build")
        channel.phase("queue")
        channel.phase("first_call")
        channel.on_wait(True)  # a compile steps aside and waits to take the device back
        channel.on_wait(False)
        channel.phase("run")
        channel.on_wait(True)
        channel.on_wait(False)
        raw = os.read(read_fd, 1 << 16).decode()
    finally:
        os.close(read_fd)
        os.close(write_fd)
    phases = [json.loads(line)["phase"] for line in raw.splitlines()]
    assert phases == ["build", "queue", "first_call", "queue", "first_call", "run", "queue", "run"]
    deadlines = clock()
    for t, phase in enumerate(phases, start=1):
        assert not deadlines.behind(phase), (phase, deadlines.phase)
        deadlines.enter(phase, float(t))
    assert deadlines.phase == "run" and deadlines.spent["first_call"] == pytest.approx(3.0)
