"""Why a child takes and lets go of the device lock, and where its long holds went: the child's side
(kernels.child.device_lock, kernels.child.hold_sampler) and what the parent's lock trace keeps of it
(kernels.parent.isolation.lock_broker)."""

from __future__ import annotations

import fcntl
import os
import sys
import time
from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.child import hold_sampler
from kernels.child.device_lock import RELEASES, TAKES, DeviceHold, FdLock
from kernels.child.hold_sampler import HoldSampler
from kernels.parent.isolation.lock_broker import LockBroker, clean_where, parse_where
from tests.kernels.conftest import fixture_source


class RecordingLock(FdLock):
    """The real lock file and gate, recording the reasons it was given."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(os.open(tmp_path / "device.lock", os.O_RDONLY | os.O_CREAT, 0o644),
                         os.open(tmp_path / "device.lock.gate", os.O_RDONLY | os.O_CREAT, 0o644))
        self.takes: list[str] = []
        self.releases: list[tuple[str, str | None]] = []

    def take(self, mode: int, blocking: bool = True, why: str = "") -> bool:
        self.takes.append(why)
        return super().take(mode, blocking, why)

    def release(self, why: str = "", where: str | None = None) -> None:
        self.releases.append((why, where))
        super().release(why, where)


def busy_for(seconds: float) -> None:
    """Host work in a function of this file (what the sampler must name)."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        time.sleep(0.01)


def test_every_take_and_release_names_why(tmp_path: Path) -> None:
    lock = RecordingLock(tmp_path)
    hold = DeviceHold(None, None, aside=True, locker=lock)
    with hold.shared():
        hold.compile_started()
        hold.compile_ended()
        hold.let_timers_in()
        with hold.off_device():
            pass
        with hold.autotuning_alone():
            pass
    assert lock.takes == ["start", "after-compile", "yield", "after-host", "autotune", "after-autotune"]
    assert [why for why, _ in lock.releases] == ["compile", "yield", "host", "autotune", "autotuned", "end"]
    assert set(lock.takes) <= set(TAKES) and {why for why, _ in lock.releases} <= set(RELEASES)
    assert all(where is None for _, where in lock.releases)  # not sampling: nothing said about where


def test_a_long_hold_says_where_the_child_was_and_a_short_one_says_nothing(tmp_path: Path) -> None:
    lock = RecordingLock(tmp_path)
    hold = DeviceHold(None, None, locker=lock, sample=True)
    with hold.shared():
        busy_for(hold_sampler.LONG_S + 0.3)
        hold.let_timers_in()  # a long hold ends here
        busy_for(0.05)  # and a short one at the block's end
    (why_long, where_long), (why_short, where_short) = lock.releases
    assert why_long == "yield" and why_short == "end" and where_short is None
    assert where_long is not None and "test_hold_reasons.py:busy_for:" in where_long, where_long
    found = parse_where(where_long)
    assert found and all(count >= 1 for _, count in found), found
    assert clean_where(where_long) == where_long, "the trace would drop what the sampler wrote"


def test_the_sampler_costs_nothing_when_off_and_samples_nothing_between_holds() -> None:
    off = HoldSampler(False)
    off.begin()
    assert off.end() is None and off._thread is None  # noqa: SLF001
    on = HoldSampler(True)
    on.begin()
    assert on.end() is None  # too short to say anything
    assert on._thread is not None and on._thread.daemon  # noqa: SLF001
    time.sleep(hold_sampler.START_S + 0.3)
    assert on.taken == 0, "the sampler looked at the child with nothing held"
    on.begin()
    busy_for(hold_sampler.START_S + 0.3)
    assert on.taken >= 1
    on.end()


def test_sites_name_the_harness_frame_the_frame_below_and_the_innermost() -> None:
    assert hold_sampler.short_path("/x/.venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py") == \
        "torch/_dynamo/eval_frame.py"
    assert hold_sampler.short_path(hold_sampler.__file__) == "kernels/child/hold_sampler.py"
    assert hold_sampler.short_path("/tmp/job/candidate_3.py") == "candidate_3.py"
    here = hold_sampler.site(sys._getframe())  # noqa: SLF001 - no harness frame here: outermost < innermost
    parts = here.split("<")
    assert 1 <= len(parts) <= 4, here
    assert parts[-1].startswith("tests/kernels/test_hold_reasons.py:test_sites_name"), here
    assert all(parse_where(f"{part}*1") for part in parts), "a frame's name broke the trace's separators"


def test_a_hook_of_the_harness_inside_torch_is_not_the_step_named() -> None:
    stack = ["kernels/child/worker.py", "kernels/child/candidate.py", "torch/nn/modules/module.py",
             "kernels/child/compile_aside.py", "importlib._bootstrap_external", "torch/_dynamo/trace_rules.py",
             "posixpath.py"]
    assert hold_sampler.picked(stack) == [1, 2, 5, 6]
    assert hold_sampler.picked(["a.py", "torch/x.py"]) == [0, 1]  # no harness frame: outermost, torch, innermost
    assert hold_sampler.picked(["kernels/child/timing.py"]) == [0]


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "lock.trace"
    monkeypatch.setenv("STARK_LOCK_TRACE", str(path))
    return path


def test_the_trace_keeps_the_reasons_and_drops_what_is_not_plain(tmp_path: Path, traced: Path) -> None:
    broker = LockBroker(tmp_path / "cuda0.lock")
    try:
        broker.request({"op": "shared", "wait": True, "why": "after-compile"})
        broker.request({"op": "release", "why": "yield", "where": "kernels/child/candidate.py:call:9<m.py:forward:3*4"})
        broker.request({"op": "exclusive", "wait": True, "why": "rm -rf /"})
        broker.request({"op": "release", "why": "end", "where": "two words*1"})
    finally:
        broker.close()
    lines = [line.split() for line in traced.read_text().splitlines()]
    assert [parts[2:] for parts in lines] == [
        ["grant", "shared", "-", "after-compile"],
        ["release", "shared", "-", "yield", "kernels/child/candidate.py:call:9<m.py:forward:3*4"],
        ["grant", "exclusive", "-", "-"],  # not a plain word: not written
        ["release", "exclusive", "-", "end"]]  # a malformed "where" is dropped


def test_a_triton_compile_gives_the_shared_side_back_and_takes_it_again_even_when_it_raises(tmp_path: Path) -> None:
    from kernels.child import compile_aside

    lock = RecordingLock(tmp_path)
    hold = DeviceHold(None, None, aside=True, locker=lock)
    seen: list[bool] = []

    def compile_probe(ok: bool) -> str:  # stands for triton.compile: sees whether a timer could take the device
        fd = os.open(tmp_path / "device.lock", os.O_RDONLY)
        try:
            seen.append(FdLock(fd, None).take(fcntl.LOCK_EX, blocking=False))
        finally:
            os.close(fd)
        if not ok:
            raise RuntimeError("PTX assembly failed")
        return "kernel"

    compile_aside._state["hold"] = hold
    try:
        wrapped = compile_aside._host_work(compile_probe)  # noqa: SLF001
        with hold.shared():
            assert wrapped(True) == "kernel"
            with pytest.raises(RuntimeError, match="PTX"):
                wrapped(False)
            with hold.exclusive():  # (a block inside a block: the lock is converted) timed: compiles stay held
                wrapped(True)
        unheld = DeviceHold(None, None, aside=False, locker=RecordingLock(tmp_path))
        compile_aside._state["hold"] = unheld
        with unheld.shared():
            wrapped(True)  # the setting off (a CPU device): nothing given back
    finally:
        compile_aside._state["hold"] = None
    assert seen == [True, True, False, False], seen
    assert lock.releases[:2] == [("triton", None), ("triton", None)]
    assert lock.takes[:3] == ["start", "after-triton", "after-triton"], lock.takes


@pytest.mark.slow
def test_waiting_for_the_threads_a_forward_started_gives_the_device_back(warm_settings: EvalSettings, tmp_path: Path,
                                                                         traced: Path) -> None:
    """A first forward() that leaves a thread running (torch.compile's pools do) is waited for, 2 s in all, with the
    shared side given back: no timer waits for that (on a busy GPU host these waits would be 43% of what timers
    wait for)."""
    settings = warm_settings.replace(cache_dir=str(tmp_path), reuse_results=False)
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("lingering_thread"), settings)
    assert result.verdict == "pass", result.reasons
    lines = [line.split() for line in traced.read_text().splitlines()]
    # the candidate's child let go for host work in its first trial and took the device again after the wait
    off = []
    for k, a in enumerate(lines):
        if a[2] == "release" and a[5] == "host" and "first_call" in a[4]:
            b = next(line for line in lines[k + 1:] if line[1] == a[1])  # that child's next line
            assert b[2] == "grant" and b[5] == "after-host", b
            off.append((float(a[0]), float(b[0])))
    assert off and off[0][1] - off[0][0] >= 1.5, off  # the 2 s wait for the thread, between the two
