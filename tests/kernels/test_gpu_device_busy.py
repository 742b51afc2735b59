"""On a CUDA device: another process filling the GPU makes the reference report device_busy and be rerun (the
evaluation succeeds once that process exits, or fails saying the GPU was busy); a problem too large for the empty
device is its own OOM, never retried. Skipped cleanly without CUDA (see tests/conftest.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from kernels import EvalSettings
from kernels.parent.reference import ensure_reference
from kernels.shared.device_busy import BACKOFF_S
from kernels.shared.errors import DeviceBusyError, ProblemError

pytestmark = pytest.mark.gpu

# get_inputs() asks for 4 GiB on the device; the output stays small
PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=1)

def get_inputs():
    return [torch.randn(1024, {columns})]

def get_init_inputs():
    return []
"""

HOG = """
import sys, time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - int(sys.argv[1]), dtype=torch.uint8, device="cuda")
print("ready", flush=True)
time.sleep(float(sys.argv[2]))
"""


def start_hog(leave_free: int, hold_s: float) -> subprocess.Popen[str]:
    """A separate process holding all but `leave_free` bytes of the GPU for `hold_s` seconds."""
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(leave_free), str(hold_s)], stdout=subprocess.PIPE,
                           text=True)
    assert hog.stdout is not None and hog.stdout.readline().strip() == "ready"
    return hog


@pytest.fixture
def stop_hogs() -> Iterator[list[subprocess.Popen[str]]]:
    hogs: list[subprocess.Popen[str]] = []
    yield hogs
    for hog in hogs:
        hog.kill()
        hog.wait()


def settings_in(tmp_path: Path) -> EvalSettings:
    return EvalSettings(device="cuda", cache_dir=str(tmp_path / "cache"), baselines=(), roofline=False,
                        build_timeout_s=300)


def test_reference_reports_device_busy_and_succeeds_after_the_hog_exits(
        tmp_path: Path, stop_hogs: list[subprocess.Popen[str]]) -> None:
    stop_hogs.append(start_hog(2 * 2**30, 8.0))
    start = time.monotonic()
    reference, _ = ensure_reference(PROBLEM.format(columns=2**20), settings_in(tmp_path))
    assert time.monotonic() - start >= BACKOFF_S[0]  # it waited and reran
    assert reference.summary["inputs"] and reference.ops


def test_reference_still_busy_after_every_rerun_says_the_gpu_was_busy(
        tmp_path: Path, stop_hogs: list[subprocess.Popen[str]]) -> None:
    stop_hogs.append(start_hog(2 * 2**30, 600.0))
    with pytest.raises(DeviceBusyError) as caught:
        ensure_reference(PROBLEM.format(columns=2**20), settings_in(tmp_path))
    message = caught.value.message
    assert "busy with other processes" in message and f"{len(BACKOFF_S) + 1} tries" in message
    assert "not the fault of the problem" in message and "4.00 GiB" in message


def test_problem_too_large_for_the_empty_device_is_its_own_oom_and_not_retried(tmp_path: Path) -> None:
    start = time.monotonic()
    with pytest.raises(ProblemError) as caught:
        ensure_reference(PROBLEM.format(columns=2**28), settings_in(tmp_path))  # 1 TiB
    assert not isinstance(caught.value, DeviceBusyError)
    assert "ran out of memory" in caught.value.message
    assert time.monotonic() - start < 60 + BACKOFF_S[0]  # one child, no waits (start-up may take a while)
