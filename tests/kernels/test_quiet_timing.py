"""Quiet timing (kernels/parent/isolation/quiet.py): a re-time pauses the host's other harness children while it times,
their deadlines leave the pauses out, and nothing but registered children of this host is ever signalled."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from kernels import evaluate
from kernels.parent import cache
from kernels.parent.isolation import quiet
from kernels.parent.isolation.quiet import Membership, Quieter, device_members, quiet_mode
from kernels.parent.isolation.watch import Deadlines
from kernels.parent.retime import retime
from kernels.shared.process_tree import start_time
from tests.kernels.conftest import fixture_source

SCALE_ADD = fixture_source("problem_scale_add")


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def wait_for_state(pid: int, wanted: str, within_s: float = 3.0) -> bool:
    until = time.monotonic() + within_s
    while time.monotonic() < until:
        if state(pid) == wanted:
            return True
        time.sleep(0.02)
    return False


def test_the_deadlines_leave_paused_time_out():
    clock = Deadlines({"build": 10.0}, None, now=100.0)
    clock.enter("build", 100.0)
    assert clock.deadline() == pytest.approx(110.0)
    clock.pause(6.0)
    assert clock.deadline() == pytest.approx(116.0)
    clock.wait(105.0)  # waiting for the lock: a pause meanwhile moves only the whole run's cap
    before = clock.deadline()
    clock.pause(2.0)
    assert clock.deadline() == pytest.approx(before)


def test_the_setting_names_its_values(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(quiet.ENV, "auto")
    assert quiet_mode() == "retime"
    monkeypatch.setenv(quiet.ENV, "0")
    assert quiet_mode() == "off"
    monkeypatch.setenv(quiet.ENV, "sometimes")
    with pytest.raises(ValueError, match="must be retime .* all .* or off"):
        quiet_mode()


def test_pauses_that_overlap_end_one_by_one_and_half_lines_wait(tmp_path: Path):
    """Two quieters (two devices) pausing one untimed child: it stays paused until both ended; a line still being
    written is read once whole. (The member is this process: nothing is signalled here.)"""
    member = Membership(tmp_path, os.getpid())
    assert member.path is not None

    def write(text: str) -> None:
        with open(member.path, "a") as handle:  # type: ignore[arg-type]
            handle.write(text)

    write("P 10.0\nP 11.0\n")
    assert member.check(12.0) == 0.0 and member.paused
    write("R 2.5\nR 1")
    assert member.check(12.0) == 2.5 and member.paused
    write(".5\n")
    assert member.check(12.0) == 1.5 and not member.paused and member.paused_s == 4.0 and member.pauses == 2
    write("P 12.0\nR 1e9\n")  # a pause longer than a quieter ever makes is credited as the longest one can be
    assert member.check(13.0) == quiet.QUIET_MAX_S + quiet.STALE_SLACK_S
    member.leave()
    assert not list(tmp_path.iterdir())


@pytest.mark.slow  # starts processes
def test_a_quieter_pauses_registered_children_only_and_a_stale_pause_ends(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch):
    members = tmp_path / "members"
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        member = Membership(members, child.pid)
        # a file left for a stranger's pid with another start time (its pid reused) and one from another namespace
        (members / f"{member.path.name.split('-')[0]}-{stranger.pid}-1").touch()  # type: ignore[union-attr]
        (members / f"999-{stranger.pid}-{start_time(stranger.pid)}").touch()
        elsewhere = Membership(tmp_path / "other-device.members", stranger.pid)  # another GPU's child: it may time
        quieter = Quieter([members], own_pid=-1)
        quieter.pause()
        assert wait_for_state(child.pid, "T")
        assert state(stranger.pid) != "T"
        assert not (members / f"{member.path.name.split('-')[0]}-{stranger.pid}-1").exists()  # type: ignore[union-attr]
        assert (members / f"999-{stranger.pid}-{start_time(stranger.pid)}").exists()  # not ours to judge
        assert member.check(time.monotonic()) == 0.0 and member.paused
        time.sleep(0.2)
        quieter.resume()
        assert wait_for_state(child.pid, "S")
        ended = member.check(time.monotonic())
        assert ended >= 0.2 and not member.paused and member.paused_s == pytest.approx(ended)
        assert quieter.facts()["most_paused"] == 1 and quieter.facts()["paused_s"] >= 0.2

        # a quieter that dies between its two signals: the member's own parent continues its child
        monkeypatch.setattr(quiet, "QUIET_MAX_S", 0.1)
        monkeypatch.setattr(quiet, "STALE_SLACK_S", 0.1)
        elsewhere.leave()
        dead = Quieter([members], own_pid=-1)
        dead.pause()
        assert wait_for_state(child.pid, "T")
        member.check(time.monotonic())
        time.sleep(0.3)
        assert member.check(time.monotonic()) >= 0.2
        assert wait_for_state(child.pid, "S")
        member.leave()
        assert not list(members.glob(f"*-{child.pid}-*"))
    finally:
        for proc in (child, stranger):
            proc.kill()
            proc.wait()


def evaluate_in_thread(settings: dict[str, Any], candidate: str) -> tuple[threading.Thread, dict[str, Any],
                                                                       list[str]]:
    """Evaluate `candidate` of the scale-add problem in a thread; returns it, its result box and the phases so far."""
    phases: list[str] = []
    box: dict[str, Any] = {}

    def run() -> None:
        box["result"] = evaluate(SCALE_ADD, candidate, settings, progress=lambda phase, *_: phases.append(phase))

    thread = threading.Thread(target=run)
    thread.start()
    return thread, box, phases


def wait_for_phase(phases: list[str], name: str, thread: threading.Thread) -> None:
    until = time.monotonic() + 120
    while name not in phases and thread.is_alive() and time.monotonic() < until:
        time.sleep(0.05)
    assert name in phases, phases


@pytest.mark.slow  # harness children
def test_a_child_paused_past_its_build_deadline_is_not_stopped_for_it(kernel_cache: str):
    """A candidate whose import spends 1 s of CPU under an 8 s build deadline, paused 12 s in the middle: it passes
    (the pause is not its time), where the deadline alone would have stopped it as a hang (checked by hand)."""
    settings = {"device": "cpu", "timing_runs": 6, "warmup_runs": 1, "build_timeout_s": 8, "cache_dir": kernel_cache,
                "fuzz": "off", "reuse_results": False, "profile": False, "baselines": [], "roofline": False,
                "sandbox": "none"}  # warm children (forked from the zygote): pausing is the subject, not isolation
    thread, box, phases = evaluate_in_thread(settings, fixture_source("spins_at_import").replace("SPIN_S = 2.0",
                                                                                                "SPIN_S = 1.0"))
    wait_for_phase(phases, "build", thread)
    time.sleep(0.3)
    device_lock = cache.device_lock(cache.cache_root(kernel_cache), "cpu")
    quieter = Quieter([device_members(device_lock)], own_pid=-1)
    quieter.pause()
    try:
        assert quieter.paused, "the evaluation's child was not registered"
        assert all(wait_for_state(pid, "T") for _, pid, _ in quieter.paused)
        time.sleep(12)
    finally:
        quieter.resume()
    thread.join(120)
    result = box["result"]
    assert result.verdict == "pass", result.reasons
    build = sum(p["seconds"] for p in result.phases if p["phase"] == "build")
    assert build > 12, result.phases


@pytest.mark.slow  # harness children
def test_a_retime_pauses_the_other_children_while_it_times(kernel_cache: str, monkeypatch: pytest.MonkeyPatch):
    settings = {"device": "cpu", "timing_runs": 40, "warmup_runs": 2, "build_timeout_s": 120,
                "cache_dir": kernel_cache, "fuzz": "off", "reuse_results": False, "profile": False, "baselines": [],
                "roofline": False, "sandbox": "none"}  # warm children, as above
    spinner = fixture_source("spins_at_import").replace("SPIN_S = 2.0", "SPIN_S = 8.0")
    thread, box, phases = evaluate_in_thread(settings, spinner)
    try:
        wait_for_phase(phases, "build", thread)
        quiet_figures = retime(SCALE_ADD, None, settings, rounds=4)
        monkeypatch.setenv(quiet.ENV, "off")
        loud_figures = retime(SCALE_ADD, None, settings, rounds=4) if thread.is_alive() else None
    finally:
        thread.join(120)
    assert quiet_figures["quiet"]["most_paused"] >= 1 and quiet_figures["quiet"]["paused_s"] > 0
    assert "other harness children (1 at most) paused while it timed" in quiet_figures["protocol"]
    assert loud_figures is None or loud_figures["quiet"] == {}
    result = box["result"]
    assert result.verdict == "pass", result.reasons
    device_lock = cache.device_lock(cache.cache_root(kernel_cache), "cpu")
    assert not list(device_members(device_lock).iterdir())  # every child left the register
