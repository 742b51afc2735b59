"""The suites' step on the search queue: advance a suite (start members as slots free, extend finished runs to the
suite's budget, mark it finished), enqueued after a suite is created, resumed or extended and whenever a run of its
owner ends, and a periodic chain (every STARK_REAP_INTERVAL_S while a suite is running) so nothing waits on an
event lost to a killed worker or a restarted Redis."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings

from stark_web.studio.service import queues

ADVANCE_JOB = "stark_web.studio.suites.service.advance"  # the RQ entry points live beside what they call
CHAIN_JOB = "stark_web.studio.suites.service.chain_job"


def chain_key() -> str:
    return queues.redis_key("suites", "next")


def enqueue_advance(suite_id: int) -> None:
    queues.queue(queues.SEARCH_QUEUE).enqueue(ADVANCE_JOB, suite_id,
                                              job_id=queues.make_job_id("suite", suite_id, uuid.uuid4().hex[:10]))
    ensure_chain()


def advance_owner(owner_id: int) -> None:
    """After a run of this user ended: advance their running suites."""
    from stark_web.studio.suites.models import Suite

    for suite_id in Suite.objects.filter(owner_id=owner_id, status=Suite.Status.RUNNING).values_list("pk", flat=True):
        enqueue_advance(suite_id)


def ensure_chain() -> None:
    conn = queues.connection()
    job_id = queues.make_job_id("suites", uuid.uuid4().hex[:12])
    interval = settings.STARK_REAP_INTERVAL_S
    if conn.set(chain_key(), job_id, nx=True, ex=interval * 4):
        queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval), CHAIN_JOB, job_id=job_id,
                                                     result_ttl=60)


def continue_chain(my_job_id: str | None) -> None:
    from stark_web.studio.suites.models import Suite

    conn = queues.connection()
    current = conn.get(chain_key())
    current = current.decode() if isinstance(current, bytes) else current
    if current not in (None, my_job_id):
        return
    if not Suite.objects.filter(status=Suite.Status.RUNNING).exists():
        conn.delete(chain_key())
        return
    interval = settings.STARK_REAP_INTERVAL_S
    job_id = queues.make_job_id("suites", uuid.uuid4().hex[:12])
    conn.set(chain_key(), job_id, ex=interval * 4)
    queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval), CHAIN_JOB, job_id=job_id,
                                                 result_ttl=60)
