"""Markers match reality: a test that starts a process, or runs longer than a few seconds, without the slow (browser,
gpu) marker fails, naming itself and the fix, so `make test-fast` (-m "not slow and not browser and not gpu") never
starts one and stays about a minute (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

INNER_TESTS = '''
import os
import subprocess
import sys
import time

import pytest


def test_unmarked_spawn():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


@pytest.mark.slow
def test_marked_spawn():
    subprocess.run([sys.executable, "-c", "pass"], check=True)


def test_swallowed_spawn():
    try:
        subprocess.run(["true"], check=True)
    except Exception:
        pass


def test_unmarked_fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)


@pytest.fixture
def server():
    return subprocess.Popen(["sleep", "0"])


def test_spawn_in_a_fixture(server):
    server.wait()


def test_no_spawn():
    assert sum(range(4)) == 6


def test_unmarked_wait():
    time.sleep(0.6)


@pytest.mark.slow
def test_marked_wait():
    time.sleep(0.6)
'''


@pytest.mark.slow
def test_an_unmarked_test_that_starts_a_process_fails_naming_the_marker(tmp_path: Path):
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n    browser: browser\n    gpu: gpu\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
               STARK_FAST_TEST_LIMIT_S="0.5")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
                           "-p", "no:django", "--strict-markers", "-rA", "-q", "test_inner.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    outcomes = {line.split("::")[1].split(" ")[0]: line.split(" ")[0] for line in out.splitlines()
                if line.startswith(("PASSED", "FAILED", "ERROR")) and "::" in line}
    assert outcomes == {"test_unmarked_spawn": "FAILED", "test_marked_spawn": "PASSED",
                        "test_swallowed_spawn": "FAILED", "test_unmarked_fork": "FAILED",
                        "test_spawn_in_a_fixture": "ERROR", "test_no_spawn": "PASSED",
                        "test_unmarked_wait": "FAILED", "test_marked_wait": "PASSED"}, out
    assert "test_inner.py::test_unmarked_spawn starts a process" in out and "is not marked slow" in out, out
    assert "mark the test (or its file, `pytestmark = pytest.mark.slow`) slow, browser or gpu" in out
    assert re.search(r"test_inner.py::test_unmarked_wait took \d+\.\d s, over the 0.5 s a test of `make test-fast` "
                     r"may take: make it faster .* or mark it slow", out), out
