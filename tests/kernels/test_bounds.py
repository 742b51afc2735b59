"""Harness bounds: a child cannot stretch its deadlines, hold the device lock past them, write outside its disk
budget, fork without bound or flood its parent. Real harness children (bubblewrap where it runs)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate, inspect_problem
from kernels.parent import cache
from kernels.parent.isolation import layers
from kernels.parent.reference import ensure_reference
from tests.kernels.conftest import fixture_source
from tests.kernels.test_sandbox_layers import SHAPE

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def total_cap_s(settings: EvalSettings) -> float:
    """The most a candidate child may live: its phases' allowances (start, build, first call; run, timing, and fuzz
    where the fuzzing stage is on) + margin."""
    from kernels.parent.isolation.watch import MARGIN_S

    fuzz = settings.run_timeout_s if settings.fuzz != "off" else 0.0
    return 3 * settings.build_timeout_s + 2 * settings.run_timeout_s + fuzz + MARGIN_S


@pytest.fixture(scope="module")
def primed_cache(tmp_path_factory: pytest.TempPathFactory, fast_settings: EvalSettings) -> str:
    """The cache of this module's hostile candidates: the problem's reference computed and cached first, once, with
    room to spare on this shared 2-core machine, so that a candidate's clock covers its own child only."""
    cache_dir = str(tmp_path_factory.mktemp("bounds-cache"))
    ensure_reference(fixture_source("problem_scale_add"),
                     fast_settings.replace(cache_dir=cache_dir, build_timeout_s=180.0, run_timeout_s=60.0))
    return cache_dir


# Hostile candidates: the scale-add model, whose first forward() first runs `attack()`.
HOSTILE = """
import fcntl, gc, os, time
import torch
import torch.nn as nn
done = []


def forge(seconds):
    # the harness's result channel, found in this process's heap: a "phase" message every second, every phase
    channels = [o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "nonce")]
    phases = ("build", "first_call", "run", "timing", "start", "queue", "profile")
    end, k = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for channel in channels:
            channel.send("phase", phase=phases[k % len(phases)])
        k += 1
        time.sleep(1.0)
{attack}

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features))
        self.bias = nn.Parameter(torch.randn(features))

    def forward(self, x):
        if not done:
            done.append(1)
            attack()
        return torch.relu(x * self.weight + self.bias)
"""
ATTACKS = {
    "forge_progress": "def attack():\n    forge(90.0)\n",
    # flock(LOCK_EX) on every descriptor (the device lock's, where the harness hands one over), held with forgeries
    "hold_every_fd": ("def attack():\n    for fd in range(4096):\n        try:\n"
                      "            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n        except OSError:\n"
                      "            pass\n    forge(60.0)\n"),
    # 600 MB into the sandbox's root (under bubblewrap an in-memory tmpfs outside every disk budget), in files of
    # 60 MB (RLIMIT_FSIZE, the disk budget, caps each file only)
    "write_root": ("def attack():\n    for k in range(10):\n        with open(f'/stark-root-fill-{k}', 'wb') as out:\n"
                   "            for _ in range(15):\n                out.write(b'x' * (4 << 20))\n"),
    # 300 processes that sleep (a linear fork bomb, so that this machine survives it on the old code)
    "fork_many": ("def attack():\n    for _ in range(300):\n        if os.fork() == 0:\n"
                  "            time.sleep(30)\n            os._exit(0)\n    time.sleep(3)\n"),
}


def hostile(name: str) -> str:
    return HOSTILE.replace("{attack}", ATTACKS[name])


def judged_alone(settings: EvalSettings, candidate: str) -> tuple[EvalResult, float]:
    started = time.monotonic()
    result = evaluate(fixture_source("problem_scale_add"), hostile(candidate), settings)
    return result, time.monotonic() - started


def test_forged_progress_ends_as_a_timeout_within_the_total_cap(fast_settings: EvalSettings, primed_cache: str) -> None:
    """#1: phase messages sent with the nonce found in the child's heap every second kept a 10 s run alive 150 s."""
    settings = fast_settings.replace(cache_dir=primed_cache, reuse_results=False, build_timeout_s=10.0,
                                     run_timeout_s=5.0, profile=False)
    result, took = judged_alone(settings, "forge_progress")
    assert result.verdict == "timeout", (result.verdict, result.reasons)
    assert took < total_cap_s(settings) + 5, f"the forger lived {took:.0f} s (cap {total_cap_s(settings):.0f} s)"


def test_a_child_locking_every_descriptor_cannot_block_another_evaluation(fast_settings: EvalSettings,
                                                                          primed_cache: str) -> None:
    """#2: flock(LOCK_EX) on the device lock's descriptor (handed over in task.json), held 60 s with forged progress,
    blocked every other evaluation on the device. Now the child has no lock descriptor; what the parent holds for it
    ends with it (at its deadline), and the lock is free once it is gone."""
    settings = fast_settings.replace(cache_dir=primed_cache, reuse_results=False, build_timeout_s=10.0,
                                     run_timeout_s=5.0, profile=False)
    outcome: dict[str, object] = {}
    holding = threading.Event()

    def progress(name: str, _detail: dict[str, object]) -> None:
        if name == "correctness":  # past its first forward(), where it takes every lock it can
            holding.set()

    def run_hostile() -> None:
        outcome["result"] = evaluate(fixture_source("problem_scale_add"), hostile("hold_every_fd"), settings,
                                     progress=progress)
        outcome["ended"] = time.monotonic()

    thread = threading.Thread(target=run_hostile)
    started = time.monotonic()
    thread.start()
    assert holding.wait(60), "the hostile candidate never reached its first forward()"
    time.sleep(2.0)
    honest = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"), settings)
    honest_ended = time.monotonic()
    thread.join(120)
    assert honest.verdict == "pass", honest.reasons
    result = outcome["result"]
    assert isinstance(result, EvalResult) and result.verdict == "timeout", getattr(result, "reasons", result)
    hostile_life = float(outcome["ended"]) - started  # type: ignore[arg-type]
    assert hostile_life < total_cap_s(settings) + 10, f"the lock holder lived {hostile_life:.0f} s"
    assert honest_ended < float(outcome["ended"]) + 20, "the honest evaluation waited long after the holder's end"  # type: ignore[arg-type]
    lock = cache.device_lock(cache.cache_root(settings.cache_dir), settings.device)
    fd = os.open(lock, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free now that both children are gone
    finally:
        os.close(fd)


def test_a_problem_check_does_not_wait_for_the_device_lock(fast_settings: EvalSettings, tmp_path: Path) -> None:
    """#2: an upload check waited behind an evaluation's hold of the device lock ("took longer than 30 s")."""
    settings = fast_settings.replace(cache_dir=str(tmp_path))
    lock = cache.device_lock(cache.cache_root(settings.cache_dir), settings.device)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDONLY | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # an evaluation timing on the device, as long as it likes
        started = time.monotonic()
        summary = inspect_problem(fixture_source("problem_matmul"), "cpu", settings)
        took = time.monotonic() - started
    finally:
        os.close(fd)
    assert summary.parameters >= 0 and took < 30, took


@pytest.mark.skipif(not layers.plan("auto", False).bwrap, reason="bubblewrap does not run here")
def test_writing_to_the_sandbox_root_fails_the_candidate(fast_settings: EvalSettings, primed_cache: str) -> None:
    """#3: 1,600 MB written into bubblewrap's in-memory root (outside the work dir) with memory_limit_mb=256 passed;
    here 600 MB against 128 MB: the root is read-only, so the write fails the candidate at once."""
    settings = fast_settings.replace(cache_dir=primed_cache, reuse_results=False, memory_limit_mb=4096,
                                     disk_limit_mb=128, profile=False)
    result, _ = judged_alone(settings, "write_root")
    assert result.verdict == "runtime_error", (result.verdict, result.reasons)
    assert "Read-only file system" in " ".join(result.reasons) + result.logs.get("run", ""), result.reasons


def test_a_fork_bomb_is_stopped_at_the_cap(fast_settings: EvalSettings, primed_cache: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """#4: 1,500 processes forked by one child, no cap. Here 300 against a cap of 64 (the parent's /proc count)."""
    monkeypatch.setenv("STARK_EVAL_MAX_PROCESSES", "64")
    settings = fast_settings.replace(cache_dir=primed_cache, reuse_results=False, profile=False)
    result, _ = judged_alone(settings, "fork_many")
    assert result.verdict == "runtime_error", (result.verdict, result.reasons)
    assert "more than 64 processes" in result.reasons[0], result.reasons


FLOOD = '''
import gc
for channel in [o for o in gc.get_objects() if type(o).__name__ == "Channel" and hasattr(o, "nonce")]:
    pad = "x" * (8 << 20)
    for k in range(100):  # 100 nonce-valid messages of 8 MB
        channel.send("summary", summary={"pad": pad, "k": k})
''' + SHAPE

PARENT = '''
import json, resource, sys, tempfile
from pathlib import Path
from kernels.parent.isolation.sandbox import run_worker
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
work = Path(tempfile.mkdtemp(prefix="flood-"))
task = {"kind": "inspect", "problem_source": sys.stdin.read(), "device": "cpu", "seed": 0, "seeds": [0],
        "memory_limit_mb": 4096, "want": {}}
run = run_worker(task, work, timeouts={"start": 120, "run": 120}, memory_limit_mb=4096, disk_limit_mb=512)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"grew_mb": (after - before) / 1024, "limit": getattr(run, "limit_exceeded", None),
                  "messages": len(run.messages)}))
'''


def test_a_message_flood_does_not_grow_the_parent_past_a_bound() -> None:
    """#4: 100 nonce-valid 8 MB messages grew the gpu worker's job process from 210 MB to 1,045 MB."""
    proc = subprocess.run([sys.executable, "-c", PARENT], input=FLOOD, capture_output=True, text=True, timeout=300,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["limit"] and "result channel" in found["limit"], found
    assert found["grew_mb"] < 200, found
