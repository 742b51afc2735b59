"""scripts/supervise.py, the supervisor of `make run`, on real processes: a dead process is restarted with
its whole process group killed first (no orphan keeps running), a process that keeps dying stops the
whole stack loudly, SIGTERM stops everything, and killing the supervisor itself takes its children along."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stark_web.studio.service.worker import pid_alive

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]
SUPERVISE = ROOT / "scripts" / "supervise.py"


def supervise(tmp_path: Path, procfile: str, *args: str) -> tuple[subprocess.Popen, Path]:
    (tmp_path / "Procfile").write_text(procfile)
    log = tmp_path / "supervise.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, str(SUPERVISE), str(tmp_path / "Procfile"), *args], cwd=tmp_path,
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return proc, log


def wait_for_file(path: Path, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.1)
    raise AssertionError(f"{path} never appeared")


def stop(proc: subprocess.Popen) -> int:
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
    return proc.wait(timeout=30)


def test_a_killed_process_is_restarted_and_its_orphans_killed(tmp_path):
    # The worker starts a child in its own process group that outlives it (like rq's work-horse) and records both.
    procfile = ("worker: sleep 600 & echo $! >> children; echo $$ >> leaders; exec sleep 600\n"
                "other: exec sleep 600\n")
    proc, log = supervise(tmp_path, procfile)
    try:
        first_leader = int(wait_for_file(tmp_path / "leaders").split()[0])
        first_child = int((tmp_path / "children").read_text().split()[0])
        os.kill(first_leader, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while len((tmp_path / "leaders").read_text().split()) < 2:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert not pid_alive(first_child), "the dead worker's orphan was left running"
        second_leader = int((tmp_path / "leaders").read_text().split()[1])
        assert pid_alive(second_leader) and "worker was killed by SIGKILL; restarting it in 1 s" in log.read_text()
    finally:
        assert stop(proc) == 0
    assert not pid_alive(second_leader), "SIGTERM left a process running"
    assert "SIGTERM: stopping everything" in log.read_text()


def test_a_process_that_keeps_dying_stops_the_stack_loudly(tmp_path):
    proc, log = supervise(tmp_path, "broken: echo starting >> starts; exit 3\nfine: echo $$ > fine; exec sleep 600\n",
                          "--max-restarts", "3", "--backoff-max-s", "0.2")
    try:
        assert proc.wait(timeout=60) == 1
    finally:
        stop(proc)
    text = log.read_text()
    assert "STOPPING THE WHOLE STACK: broken exited with status 3, its death number 4" in text, text
    assert len((tmp_path / "starts").read_text().split()) == 4
    assert not pid_alive(int((tmp_path / "fine").read_text())), "the healthy process was left running"


def test_killing_the_supervisor_takes_its_children_along(tmp_path):
    proc, _ = supervise(tmp_path, "sleeper: echo $$ > pid; exec sleep 600\n")
    child = int(wait_for_file(tmp_path / "pid"))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while pid_alive(child):
        assert time.monotonic() < deadline, "a child outlived its killed supervisor"
        time.sleep(0.1)


def test_a_killed_workers_job_process_in_its_own_group_is_killed_before_the_restart(tmp_path):
    """rq's work-horse calls os.setpgrp(), so killing the worker's group missed it and it
    finished its job beside the new worker. Here the worker forks the same way; the horse must die at once."""
    worker = ("import os, sys, time\n"
              "horse = os.fork()\n"
              "if horse == 0:\n"
              "    os.setpgrp()\n"
              "    time.sleep(600)\n"
              "    os._exit(0)\n"
              "open('horses', 'a').write(f'{horse}\\n')\n"
              "open('leaders', 'a').write(f'{os.getpid()}\\n')\n"
              "time.sleep(600)\n")
    (tmp_path / "worker.py").write_text(worker)
    proc, log = supervise(tmp_path, f"gpu: exec {sys.executable} worker.py\n")
    try:
        leader = int(wait_for_file(tmp_path / "leaders").split()[0])
        horse = int((tmp_path / "horses").read_text().split()[0])
        deadline = time.monotonic() + 10  # the horse calls setpgrp() after the fork: wait for it, not race it
        while os.getpgid(horse) != horse and time.monotonic() < deadline:
            time.sleep(0.05)
        assert os.getpgid(horse) == horse != os.getpgid(leader)  # a group of its own, as rq's horse
        os.kill(leader, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while pid_alive(horse):
            assert time.monotonic() < deadline, f"the orphaned horse {horse} still runs\n{log.read_text()}"
            time.sleep(0.1)
        while len((tmp_path / "leaders").read_text().split()) < 2:  # and the worker was restarted
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert "killing what gpu left behind" in log.read_text()
    finally:
        assert stop(proc) == 0
