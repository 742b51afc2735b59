"""A harness child's memory as the parent checks it four times a second (kernels.shared.process_tree.tree_memory_mb):
the resident sizes of the child's processes while their sum is under the limit (one short read each), their
proportional set sizes near it; a process that left the child's group (setsid) still counts."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from kernels.shared import process_tree
from kernels.shared.process_tree import tree_memory_mb
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # starts processes

HOLD = ("import sys,time\nhog=bytearray(int(sys.argv[1])<<20)\nhog[::4096]=b'x'*len(hog[::4096])\n"
        "print('ready',flush=True)\ntime.sleep(60)")


@pytest.fixture()
def holders() -> Iterator[Callable[[int], int]]:
    """Start processes that each keep N MB resident; killed after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(mb: int) -> int:
        proc = subprocess.Popen([sys.executable, "-c", HOLD, str(mb)], stdout=subprocess.PIPE)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"  # every page touched
        return proc.pid

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


def test_under_the_limit_the_resident_sizes_decide_without_reading_smaps(holders: Callable[[int], int],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    pids = [holders(64), holders(32)]
    read: list[int] = []
    monkeypatch.setattr(process_tree, "_pss_kb", lambda pid: read.append(pid))
    used = tree_memory_mb(pids, limit_mb=10_000)
    assert 96 <= used < 96 + 2 * 60, used  # both holders plus two Pythons
    assert read == []  # smaps_rollup (a walk of the page tables) is never read under the limit


def test_near_the_limit_shared_pages_are_counted_once(holders: Callable[[int], int]) -> None:
    pids = [holders(64), holders(64)]
    proportional = tree_memory_mb(pids, limit_mb=1)  # over the limit: the figure it is judged by
    resident = tree_memory_mb(pids, limit_mb=10_000)
    assert 128 <= proportional <= resident, (proportional, resident)


def test_gone_processes_count_nothing(holders: Callable[[int], int]) -> None:
    pid = holders(16)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert tree_memory_mb([pid, gone.pid], 10_000) == tree_memory_mb([pid], 10_000) > 16
    assert tree_memory_mb([gone.pid], 1) == 0.0
    assert tree_memory_mb([pid, pid], 10_000) == tree_memory_mb([pid], 10_000)  # a process named twice counts once


def test_a_grandchild_that_left_the_group_counts_against_the_limit(fast_settings: EvalSettings,
                                                                     tmp_path: Path) -> None:
    """escape_group_hog: the candidate's import forks a grandchild that setsid()s out of the worker's group and keeps
    1.2 GB resident; the candidate alone stays far under 1 GB."""
    settings = fast_settings.replace(cache_dir=str(tmp_path), reuse_results=False, memory_limit_mb=1024,
                                     sandbox="none", profile=False)
    result: EvalResult = evaluate(fixture_source("problem_matmul"), fixture_source("escape_group_hog"), settings)
    assert result.verdict == "runtime_error", (result.verdict, result.reasons)
    assert "more than memory_limit_mb=1024" in result.reasons[0], result.reasons
