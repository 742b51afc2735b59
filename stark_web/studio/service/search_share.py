"""One user's share of the search workers: at most STARK_SEARCH_SHARE_PER_USER of their agents' steps (expand jobs:
LLM calls, the offline team's analysis of the problem in a harness child, up to its deadline) run at once, across
all search workers; by default every worker but one (at least one), so with two workers one user's hanging analyses
hold one of them and the other serves everyone else.

A step over its user's share is not run: it is scheduled again STEP_AGAIN_S later under a job id of its own (the
node's job id follows it, so the reaper sees a live job) and frees its worker at once. Slots are leases in Redis (a
sorted set per user, scored by expiry), taken and given back by the job and renewed every LEASE_S / 3 while it
runs, so a worker killed outright frees its slot within LEASE_S.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta

from django.conf import settings
from rq import Worker

from stark_web.studio.service import leases, queues

STEP_AGAIN_S = 3.0
LEASE_S = 30

def search_workers() -> int:
    return Worker.count(connection=queues.connection(), queue=queues.queue(queues.SEARCH_QUEUE))


def share() -> int:
    """How many steps one user may have running: STARK_SEARCH_SHARE_PER_USER, or (0) every live search worker but
    one, at least one."""
    configured = int(getattr(settings, "STARK_SEARCH_SHARE_PER_USER", 0))
    return configured if configured > 0 else max(1, search_workers() - 1)


def _key(user_id: int) -> str:
    return queues.redis_key("search-share", str(int(user_id)))


def claim(user_id: int, holder: str, limit: int | None = None) -> int | None:
    """Take one of the user's slots for `holder`: None when taken, else how many of their steps run already."""
    return leases.claim(queues.connection(), _key(user_id), holder, limit if limit is not None else share(), LEASE_S)


def release(user_id: int, holder: str) -> None:
    queues.connection().zrem(_key(user_id), holder)


@contextlib.contextmanager
def slot(user_id: int | None) -> Iterator[bool]:
    """True (and a slot held until the block ends) when the user's step may run now; False when their share is
    full. A step without an owner (None) always runs."""
    if user_id is None:
        yield True
        return
    holder = uuid.uuid4().hex
    if claim(user_id, holder) is not None:
        yield False
        return
    done = threading.Event()

    def renew() -> None:
        while not done.wait(LEASE_S / 3):
            with contextlib.suppress(Exception):  # Redis gone for a moment: the next renewal may work
                queues.connection().zadd(_key(user_id), {holder: time.time() + LEASE_S}, xx=True)

    threading.Thread(target=renew, name="search-share-lease", daemon=True).start()
    try:
        yield True
    finally:
        done.set()
        with contextlib.suppress(Exception):  # Redis gone: the lease runs out by itself
            release(user_id, holder)


def run_in_share(user_id: int | None, step: Callable[[], str], again: Callable[[], str]) -> str:
    """`step()` within the user's share, else `again()` (which schedules the step for later)."""
    with slot(user_id) as allowed:
        return step() if allowed else again()


def expand_again(run_id: int, node_pk: int, tries: int) -> str:
    """Schedule an expand step that found its user's share full STEP_AGAIN_S later; the node's job id follows it
    (set after the job exists, so the reaper never sees the node without a live job)."""
    from stark_web.studio.models import Node

    job_id = queues.make_job_id("expand", node_pk, tries, "again", uuid.uuid4().hex[:8])
    queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=STEP_AGAIN_S), "stark_web.studio.jobs.expand_attempt",
                                                 run_id, node_pk, tries, job_id=job_id)
    Node.objects.filter(pk=node_pk, phase="expand", tries=tries, claim="").update(job_id=job_id)
    return (f"node pk {node_pk} try {tries}: its user's share of the search workers is full "
            f"(STARK_SEARCH_SHARE_PER_USER); again in {STEP_AGAIN_S:g} s")
