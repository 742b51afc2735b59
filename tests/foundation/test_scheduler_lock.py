"""Red-team R3: a search worker killed with SIGKILL leaves rq's scheduler lock behind (for up to 61 s, or
for as long as a Redis restored from its AOF keeps it); its replacement must take the lock at start, not a
maintenance interval later, and a live holder's lock must be left alone."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest import ARTIFACTS

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def lock_holder(redis_client, queue_name: str) -> str | None:
    from rq.scheduler import RQScheduler

    holder = redis_client.get(RQScheduler.get_locking_key(queue_name))
    return holder.decode() if holder else None


@pytest.mark.django_db(transaction=True)
def test_the_scheduler_lock_of_a_dead_worker_is_cleared_on_start(redis_client, start_worker):
    from rq.scheduler import RQScheduler

    from search.app.service import queues
    from search.app.service.worker import clear_stale_scheduler_locks
    from tests.service.helpers import wait_for

    name = queues.queue_name("search")
    first = start_worker("search", "--with-scheduler", name="first-scheduler")
    old = wait_for(lambda: lock_holder(redis_client, name), 30, "the first worker's scheduler to take the lock")
    assert clear_stale_scheduler_locks(redis_client, [name]) == [], "a live holder's lock was cleared"
    assert lock_holder(redis_client, name) == old

    os.killpg(first.pid, signal.SIGKILL)  # the worker and its scheduler process
    first.wait()
    killed_at = time.monotonic()
    left_s = redis_client.pttl(RQScheduler.get_locking_key(name)) / 1000
    assert lock_holder(redis_client, name) == old and left_s > 20, "the dead scheduler's lock vanished by itself"

    start_worker("search", "--with-scheduler", name="second-scheduler")
    new = wait_for(lambda: (holder := lock_holder(redis_client, name)) not in (None, old) and holder, 55,
                   "the second worker's scheduler to take the lock")
    assert time.monotonic() - killed_at < left_s, "the lock was taken only after it expired by itself"
    assert new != old
    assert "cleared the scheduler lock of" in (ARTIFACTS / "worker-second-scheduler.log").read_text()
