"""A harness child cannot spend what its parent does not count: threads (a 5,000-thread child), memory no file
system shows (memfds written and never mapped, SysV shared memory), decoded messages that outgrow their bytes, or
phases forged backwards. Real harness children (bubblewrap where it runs), each stopped with a named flag."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent.isolation import cgroups
from kernels.parent.isolation.sandbox import run_worker
from kernels.parent.isolation.worker_run import WorkerRun
from tests.kernels.conftest import fixture_source
from tests.kernels.test_sandbox_layers import SHAPE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def prime(settings: EvalSettings) -> None:
    """The problem's reference computed and cached first, with room to spare on a shared 2-core machine."""
    evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"),
             settings.replace(build_timeout_s=180.0, run_timeout_s=60.0))

# problems whose import attacks (the child of an upload check or a reference runs exactly this)
THREADS = """
import threading, time
threading.stack_size(1 << 16)  # small stacks: the address-space limit is not what stops it
for _ in range(5000):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
time.sleep(60)
""" + SHAPE

HIDDEN_MEMORY = """
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
if libc.shmget(0, 800 << 20, 0o1600) < 0:  # SysV shared memory: refused to every child
    print(f"shmget refused: errno {ctypes.get_errno()}", flush=True)
held, chunk = [], b"x" * (50 << 20)
for k in range(4):  # 1.6 GB in memfds that are never mapped (400 MB each: RLIMIT_FSIZE caps one file)
    fd = os.memfd_create(f"hoard{k}")
    for _ in range(8):
        os.write(fd, chunk)
    held.append(fd)
time.sleep(40)
""" + SHAPE


def run_problem(source: str, tmp_path: Path, memory_limit_mb: float = 1024) -> tuple[WorkerRun, float]:
    task = {"kind": "inspect", "problem_source": source, "device": "cpu", "seed": 0, "seeds": [0],
            "memory_limit_mb": memory_limit_mb, "want": {}}
    work = Path(tempfile.mkdtemp(prefix="bounds-", dir=tmp_path))
    started = time.monotonic()
    run = run_worker(task, work, timeouts={"start": 120, "run": 120}, memory_limit_mb=memory_limit_mb,
                     disk_limit_mb=512)
    return run, time.monotonic() - started


def cgroup_modes() -> list[str]:
    """The parent's poll always; the host's control groups too where it gives the harness some."""
    return ["off", *(["auto"] if cgroups.bases() else [])]


def host_shmem_mb() -> float:
    with open("/proc/meminfo") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Shmem:")) / 1024


@pytest.fixture
def cgroup_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("STARK_EVAL_CGROUPS", request.param)
    monkeypatch.setattr(cgroups, "_found", [])  # decided again under this setting
    return request.param


@pytest.mark.parametrize("cgroup_mode", cgroup_modes(), indirect=True)
def test_a_5000_thread_child_is_stopped_with_a_named_flag(cgroup_mode: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """5,000 threads lived 60 s and passed: the process cap counted processes only."""
    monkeypatch.setenv("STARK_EVAL_MAX_TASKS", "300")
    run, took = run_problem(THREADS, tmp_path)
    assert run.limit_exceeded and "more than 300 threads and processes" in run.limit_exceeded, (run.limit_exceeded,
                                                                                                run.log[-2000:])
    assert took < 20, took
    print(f"\n[{cgroup_mode}] 5,000-thread child stopped after {took:.1f} s: {run.limit_exceeded}")


@pytest.mark.parametrize("cgroup_mode", cgroup_modes(), indirect=True)
def test_memfd_and_sysv_memory_count_or_are_refused(cgroup_mode: str, tmp_path: Path) -> None:
    """1.5 GB of unmapped memfds and 800 MB of SysV shared memory were held 40 s with memory_limit_mb=1024."""
    before = host_shmem_mb()
    run, took = run_problem(HIDDEN_MEMORY, tmp_path)
    assert "shmget refused: errno 1" in run.log, run.log[-2000:]
    assert run.memory_exceeded_mb and run.memory_exceeded_mb > 1024, (run.memory_exceeded_mb, run.limit_exceeded,
                                                                      run.log[-2000:])
    assert took < 30, took
    until = time.monotonic() + 15
    while host_shmem_mb() > before + 100 and time.monotonic() < until:  # the kernel frees a killed child's pages
        time.sleep(0.2)
    assert host_shmem_mb() < before + 100, (before, host_shmem_mb())  # nothing outlives the child
    print(f"\n[{cgroup_mode}] memfd hoard stopped after {took:.1f} s at {run.memory_exceeded_mb:.0f} MB")


# a flood of nonce-valid messages, each under the byte cap: first the largest structure a message may decode to,
# until all kept messages pass their cap; the parent measures its own peak
FLOOD = '''
import gc, time
for channel in [o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "nonce")]:
    pad = [[]] * 190_000  # 0.76 MB of text, 190,000 lists once decoded
    for k in range(40):
        channel.send("summary", summary={"pad": pad, "k": k})
    big = [[]] * 1_000_000  # 3 MB lines of empty lists (the parent once decoded 21 of them to 1.7 GB)
    for k in range(21):
        channel.send("summary", summary={"pad": big, "k": k})
time.sleep(30)
''' + SHAPE

PARENT = '''
import json, os, sys, tempfile, threading, time
from pathlib import Path
from kernels.parent.isolation.sandbox import run_worker


def resident_mb():
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


before, peak, done = resident_mb(), [0.0], threading.Event()


def sample():  # the parent's resident memory while it reads the child, every 5 ms
    while not done.is_set():
        peak[0] = max(peak[0], resident_mb())
        time.sleep(0.005)


threading.Thread(target=sample, daemon=True).start()
cpu = time.process_time()
work = Path(tempfile.mkdtemp(prefix="flood-"))
task = {"kind": "inspect", "problem_source": sys.stdin.read(), "device": "cpu", "seed": 0, "seeds": [0],
        "memory_limit_mb": 4096, "want": {}}
started = time.monotonic()
run = run_worker(task, work, timeouts={"start": 120, "run": 120}, memory_limit_mb=4096, disk_limit_mb=512)
done.set()
print(json.dumps({"grew_mb": peak[0] - before, "before_mb": before, "peak_mb": peak[0],
                  "limit": run.limit_exceeded, "messages": len(run.messages), "took_s": time.monotonic() - started,
                  "cpu_s": time.process_time() - cpu}))
'''
PEAK_MB = 150  # the most one child's messages may grow its parent (decoded objects kept + one message decoding)


def test_a_flood_of_small_values_is_stopped_and_the_parents_peak_is_bounded() -> None:
    """21 nonce-valid 3 MB lines of `[[],[],...]` drove the parent to 1.74 GB and 63 s of CPU."""
    proc = subprocess.run([sys.executable, "-c", PARENT], input=FLOOD, capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["limit"] and "values in all over the harness's result channel" in found["limit"], found
    assert found["grew_mb"] < PEAK_MB, found
    assert found["cpu_s"] < 15, found
    print(f"\nflood stopped after {found['took_s']:.1f} s; parent's peak {found['peak_mb']:.0f} MB (after its "
          f"imports {found['before_mb']:.0f} MB, grew {found['grew_mb']:.0f} MB), "
          f"{found['cpu_s']:.1f} s of CPU")


# a candidate whose first forward() starts a thread that, once the run phase began, forges build, first_call and
# start with the nonce found in the heap; its second forward() hangs
BACKWARDS = """
import gc, threading, time
import torch
import torch.nn as nn
calls = []


def forge_backwards():
    channels = [o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "nonce")]
    while not any(c.current == "run" for c in channels):
        time.sleep(0.05)
    for phase in ("build", "first_call", "start"):
        for channel in channels:
            channel.send("phase", phase=phase)
        time.sleep(0.3)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        calls.append(1)
        if len(calls) == 1:
            threading.Thread(target=forge_backwards, daemon=True).start()
        elif len(calls) == 2:
            time.sleep(300)
        return torch.relu(x * self.weight + self.bias)
"""


def test_phases_forged_backwards_end_at_the_run_deadline(fast_settings: EvalSettings, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate forged build -> first_call -> start after its run began: it lived 160-181 s against a 10 s run
    deadline and the verdict blamed the build phase. An honest candidate's own phases (its waits for the device
    included) are never refused."""
    refused: list[str] = []
    original = WorkerRun.refuse_phase
    monkeypatch.setattr(WorkerRun, "refuse_phase", lambda self, step: (refused.append(step), original(self, step)))
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, build_timeout_s=60.0,
                                     run_timeout_s=5.0, profile=False)
    prime(settings)  # the reference and an honest candidate
    assert refused == [], refused
    phases: list[tuple[float, str]] = []
    started = time.monotonic()
    result = evaluate(fixture_source("problem_scale_add"), BACKWARDS, settings,
                      progress=lambda name, _detail: phases.append((time.monotonic(), name)))
    ended = time.monotonic()
    assert result.verdict == "timeout", (result.verdict, result.reasons)
    assert {"build after run", "first_call after run", "start after run"} <= set(refused), refused
    run_began = next(t for t, name in reversed(phases) if name == "correctness")
    assert ended - run_began < settings.run_timeout_s + 5, (ended - run_began, phases)
    assert "run phase took longer than run_timeout_s" in " ".join(result.reasons), result.reasons  # the phase seen
    print(f"\nbackwards forger stopped {ended - run_began:.1f} s after its run began ({ended - started:.1f} s in all): "
          f"{result.reasons[:1]}")
