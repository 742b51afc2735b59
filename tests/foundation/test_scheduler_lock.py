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

    from stark_web.studio.service import queues
    from stark_web.studio.service.worker import clear_stale_scheduler_locks
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


def test_a_fresh_lock_without_a_hash_is_watched_until_its_hash_comes_or_cannot(redis_client):
    """rq takes the lock before its scheduler process writes its hash: a holder killed in between left a fresh
    lock with no hash (a replacement started within 6 s would judge it live and wait for it to expire). So the
    lock is watched: no hash by the time it is ~6 s old means the holder is gone;
    a hash that appears meanwhile is judged as always (here: this process, alive)."""
    import socket
    import threading

    from rq.scheduler import SCHEDULER_KEY_TEMPLATE, RQScheduler

    from stark_web.studio.service.worker import clear_stale_scheduler_locks

    gone, key = "stark-test-gone", RQScheduler.get_locking_key("stark-test-gone")
    redis_client.set(key, "ghost-scheduler", px=58_000)  # taken 3 s ago, holder killed before its hash
    started = time.monotonic()
    assert clear_stale_scheduler_locks(redis_client, [gone]) == [gone]
    assert redis_client.get(key) is None
    assert 1.5 < time.monotonic() - started < 8, "it waited for the lock to age past the fresh window, no longer"

    live, key = "stark-test-live", RQScheduler.get_locking_key("stark-test-live")
    redis_client.set(key, "late-scheduler", px=60_500)
    born = threading.Timer(1.0, lambda: redis_client.hset(SCHEDULER_KEY_TEMPLATE % "late-scheduler", mapping={
        "hostname": socket.gethostname(), "pid": str(os.getpid())}))
    born.start()
    try:
        assert clear_stale_scheduler_locks(redis_client, [live]) == []
    finally:
        born.join()
        redis_client.delete(key, SCHEDULER_KEY_TEMPLATE % "late-scheduler")
    assert time.monotonic() - started < 20
