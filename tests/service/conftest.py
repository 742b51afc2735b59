"""Fixtures of the service tests: real workers for both queues with a short heartbeat, and a reaper."""

from __future__ import annotations

import sys

import pytest

WORKER_CLASS = ("--worker-class", "stark_web.studio.service.worker.Worker")
# A killed worker's job is found abandoned after 1 + 3 s; the scheduled reaper passes every 2 s.
FAST_HEARTBEAT = {"STARK_JOB_HEARTBEAT_S": "1", "STARK_JOB_HEARTBEAT_GRACE_S": "3", "STARK_REAP_INTERVAL_S": "2"}


class Workers:
    """Real `manage.py rqworker` processes with a 1 s heartbeat (a killed one is found in ~4 s)."""

    def __init__(self, start_worker) -> None:
        self._start = start_worker
        self.procs: dict[str, list] = {"search": [], "gpu": []}

    def start(self, queue: str, *args: str, **env: str):
        proc = self._start(queue, *WORKER_CLASS, *args, **{**FAST_HEARTBEAT, **env})
        self.procs[queue].append(proc)
        return proc


@pytest.fixture
def workers(start_worker, redis_client) -> Workers:
    """One search worker (with the rq scheduler, which runs the periodic reaper) and one gpu worker."""
    w = Workers(start_worker)
    w.start("search", "--with-scheduler")
    w.start("gpu")
    return w


@pytest.fixture
def reaper(processes):
    """`manage.py stark_reap --every 1`, as an operator would run it beside the workers."""
    return processes.start([sys.executable, "manage.py", "stark_reap", "--every", "1"], "reaper")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-ada-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("eve", password="pw-eve-123")
