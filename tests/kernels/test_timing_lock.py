"""Concurrent evaluations on one device take turns on it (EvalSettings.exclusive_device): while another holder
has the device lock, an evaluation starts and builds but runs nothing on the device; the wait has its own deadline
(not the run phase's); with the setting off it does not wait."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

from kernels import EvalResult, EvalSettings, cache, evaluate
from kernels.timing import exclusive
from tests.kernels.conftest import fixture_source

HOLD_S = 12.0


def evaluate_while_locked(settings: EvalSettings) -> tuple[EvalResult, float]:
    """Hold the cpu device lock for HOLD_S seconds while one evaluation runs; return it and when it ended
    (seconds after the lock was taken)."""
    lock = cache.device_lock(cache.cache_root(settings.cache_dir), settings.device)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    done: dict[str, object] = {}

    def run() -> None:
        done["result"] = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"), settings)
        done["at"] = time.monotonic()

    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        taken = time.monotonic()
        worker = threading.Thread(target=run)
        worker.start()
        worker.join(HOLD_S)
        fcntl.flock(fd, fcntl.LOCK_UN)
        worker.join(120)
    finally:
        os.close(fd)
    assert "result" in done, "the evaluation did not finish"
    return done["result"], done["at"] - taken  # type: ignore[return-value,operator]


def test_device_work_waits_for_the_device_lock(fast_settings: EvalSettings, tmp_path: Path) -> None:
    # run_timeout_s below the wait: queueing for the device must not count as a slow run
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, run_timeout_s=8.0)
    result, ended = evaluate_while_locked(settings)
    assert result.verdict == "pass", result.reasons
    assert ended >= HOLD_S, f"the evaluation finished {ended:.1f} s after the lock was taken, while it was held"


def test_without_exclusive_device_nothing_waits(fast_settings: EvalSettings, tmp_path: Path) -> None:
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, exclusive_device=False)
    result, ended = evaluate_while_locked(settings)
    assert result.verdict == "pass", result.reasons
    assert ended < HOLD_S, f"the evaluation waited {ended:.1f} s for a lock it was told not to take"


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
