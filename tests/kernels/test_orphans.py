"""A harness process killed outright (SIGKILL: a stream deadline's `timeout -s KILL`, an RQ job timeout, the OOM
killer) never leaves its evaluation's child running without anyone to enforce its deadlines: a child forked from
the warm-start zygote is killed by the zygote when its requester hangs up (kernels.parent.isolation.zygote), a spawned one by its
parent-death signal (kernels.parent.isolation.layers.child_limits). What a spawned child started itself outlives it: the
parent-death signal is not inherited, and nobody is left to kill its group (bubblewrap children die with their
namespace; zygote children with their group)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kernels.child.zygote_server import parent_of
from kernels.shared.process_tree import start_time
from tests.teams.processes import command_lines, running_with

pytestmark = pytest.mark.slow  # starts processes (a harness parent, its children, a zygote)

ROOT = Path(__file__).resolve().parents[2]
MARKER = "71.3917"
PARENT = textwrap.dedent("""
    import sys
    from kernels import EvalSettings, evaluate
    from tests.kernels.conftest import fixture_source
    settings = EvalSettings(cache_dir=sys.argv[1], correctness_trials=3, timing_runs=5, warmup_runs=1, baselines=(),
                            roofline=False, build_timeout_s=600, run_timeout_s=600, memory_limit_mb=4096,
                            sandbox="none", warm_start=sys.argv[2] == "warm", fuzz="off")
    evaluate(fixture_source("problem_scale_add"), fixture_source("hang_with_sleeper"), settings)
""")


def _alive(pid: int, started: str | None) -> bool:
    return started is not None and start_time(pid) == started


def _wait(condition, seconds: float) -> bool:  # noqa: ANN001
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return False


@pytest.mark.parametrize("start", ["warm", "spawned"])
def test_a_killed_harness_process_takes_its_child_with_it(kernel_cache: str, start: str) -> None:
    # the session's cache: its reference outputs and (warm) its zygote are ready or shared with other tests
    assert not command_lines(MARKER), "a sleeper of an earlier run is still alive"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, kernel_cache, start], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    worker: int | None = None
    started: str | None = None
    try:
        assert _wait(lambda: bool(command_lines(MARKER)), 120), "the candidate never started its sleeper"
        time.sleep(1.0)  # the child is in its first call, with nobody but its parent to time it out
        worker = parent_of(next(iter(command_lines(MARKER))))  # the evaluation's child (the sleeper's parent)
        assert worker is not None and worker != parent.pid
        started = start_time(worker)
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _wait(lambda: not _alive(worker, started), 20), "the evaluation's child outlived its killed parent"
        if start == "warm":  # and what it started: the zygote kills the child's group
            assert running_with(MARKER, 20) == [], "the child's own child outlived it"
    finally:
        parent.kill()
        survivors = [worker] if worker is not None and _alive(worker, started) else []
        for pid in [*command_lines(MARKER), *survivors]:  # sleepers, a surviving child (the zygote is the session's)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
