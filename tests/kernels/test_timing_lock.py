"""Concurrent evaluations on one device never time while another uses it (EvalSettings.exclusive_device): timed
work holds the device lock alone, untimed device work (first calls, trials, probes) shares it, and a waiting timer
keeps new shared holders out. While another holder has the lock exclusively, an evaluation starts and builds but
runs nothing on the device; while another shares it, the evaluation's timing waits. The waits have their own
deadline (not the run phase's); with the setting off nothing waits."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from kernels.child.timing import exclusive, shared
from kernels.parent import cache
from tests.kernels.conftest import fixture_source

HOLD_S = 12.0


def evaluate_while_locked(settings: EvalSettings, mode: int = fcntl.LOCK_EX,
                          hold_s: float = HOLD_S) -> tuple[EvalResult, float]:
    """Hold the cpu device lock (in `mode`) for hold_s seconds, or until the evaluation that runs meanwhile ends;
    return it and when it ended (seconds after the lock was taken)."""
    lock = cache.device_lock(cache.cache_root(settings.cache_dir), settings.device)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    done: dict[str, object] = {}

    def run() -> None:
        done["result"] = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"), settings)
        done["at"] = time.monotonic()

    try:
        fcntl.flock(fd, mode)
        taken = time.monotonic()
        worker = threading.Thread(target=run)
        worker.start()
        worker.join(hold_s)
        fcntl.flock(fd, fcntl.LOCK_UN)
        worker.join(120)
    finally:
        os.close(fd)
    assert "result" in done, "the evaluation did not finish"
    return done["result"], done["at"] - taken  # type: ignore[return-value,operator]


@pytest.mark.slow
def test_device_work_waits_for_the_device_lock(fast_settings: EvalSettings, tmp_path: Path) -> None:
    # run_timeout_s below the wait: queueing for the device must not count as a slow run
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, run_timeout_s=8.0)
    result, ended = evaluate_while_locked(settings)
    assert result.verdict == "pass", result.reasons
    assert ended >= HOLD_S, f"the evaluation finished {ended:.1f} s after the lock was taken, while it was held"


@pytest.mark.slow
def test_timing_waits_for_a_shared_holder(fast_settings: EvalSettings, tmp_path: Path) -> None:
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, run_timeout_s=8.0)
    result, ended = evaluate_while_locked(settings, fcntl.LOCK_SH)
    assert result.verdict == "pass", result.reasons
    assert ended >= HOLD_S, f"the evaluation finished {ended:.1f} s after a shared hold began: it timed beside it"


def open_lock(tmp_path: Path) -> tuple[int, int]:
    """A fresh pair of descriptors (device lock, gate), as the harness opens for each worker."""
    return (os.open(tmp_path / "device.lock", os.O_RDONLY | os.O_CREAT, 0o644),
            os.open(tmp_path / "device.lock.gate", os.O_RDONLY | os.O_CREAT, 0o644))


def in_thread(fds: tuple[int, int], lock: object, hold_s: float, log: list[tuple[str, float]], name: str) -> threading.Thread:
    def run() -> None:
        with lock(*fds):  # type: ignore[operator]
            log.append((f"{name} in", time.monotonic()))
            time.sleep(hold_s)
            log.append((f"{name} out", time.monotonic()))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_shared_holders_overlap_and_a_waiting_timer_goes_first(tmp_path: Path) -> None:
    """Two shared holders run together; an exclusive request waits for them; a shared request made while the
    exclusive one waits comes after it (writer preference, so timers are not starved by a stream of trials)."""
    log: list[tuple[str, float]] = []
    fds = [open_lock(tmp_path) for _ in range(4)]
    try:
        first = in_thread(fds[0], shared, 1.5, log, "shared1")
        second = in_thread(fds[1], shared, 1.5, log, "shared2")
        time.sleep(0.3)
        timer = in_thread(fds[2], exclusive, 0.5, log, "timer")
        time.sleep(0.3)
        late = in_thread(fds[3], shared, 0.1, log, "late")
        for thread in (first, second, timer, late):
            thread.join(10)
    finally:
        for pair in fds:
            for fd in pair:
                os.close(fd)
    at = dict(log)
    assert at["shared2 in"] < at["shared1 out"], "two shared holders did not overlap"
    assert at["timer in"] >= max(at["shared1 out"], at["shared2 out"]), "the timer ran beside a shared holder"
    assert at["late in"] >= at["timer out"], "a shared holder slipped in ahead of the waiting timer"


@pytest.mark.slow
def test_without_exclusive_device_nothing_waits(fast_settings: EvalSettings, tmp_path: Path) -> None:
    # A long hold (released as soon as the evaluation ends): a busy machine slows the evaluation, never past it.
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, exclusive_device=False)
    result, ended = evaluate_while_locked(settings, hold_s=120.0)
    assert result.verdict == "pass", result.reasons
    assert ended < 120.0, f"the evaluation waited {ended:.1f} s for a lock it was told not to take"


def test_exclusive_without_a_lock_is_a_no_op() -> None:
    with exclusive(None):
        pass


def test_workers_pinned_to_different_gpus_use_different_locks(tmp_path: Path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    gpu0 = cache.device_lock(tmp_path, "cuda")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    gpu1 = cache.device_lock(tmp_path, "cuda")
    assert gpu0 != gpu1 and gpu1 == cache.device_lock(tmp_path, "cuda")
    assert cache.device_lock(tmp_path, "cpu") == tmp_path / "locks" / "device-cpu.lock"
