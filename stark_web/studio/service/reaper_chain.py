"""The reaper's schedule: one pending reaper job at a time on the rq scheduler, every STARK_REAP_INTERVAL_S
seconds while runs are active (the pass itself is stark_web.studio.service.reaper.reap). The steps start the chain;
it needs nothing from them."""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.conf import settings

from stark_web.studio.models import Run
from stark_web.studio.service import queues


def chain_key() -> str:
    return queues.redis_key("reaper", "next")


def interval_s() -> int:
    return settings.STARK_REAP_INTERVAL_S


def ensure_reaper() -> None:
    """Start the periodic reaper chain on the rq scheduler unless one is already pending."""
    conn = queues.connection()
    job_id = queues.make_job_id("reaper", uuid.uuid4().hex[:12])
    if conn.set(chain_key(), job_id, nx=True, ex=interval_s() * 4):
        queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval_s()), "stark_web.studio.jobs.reap_job",
                                                     job_id=job_id, result_ttl=60)


def continue_chain(my_job_id: str | None) -> None:
    """Schedule the next reaper pass if this job owns the chain and some run is still active."""
    conn = queues.connection()
    current = conn.get(chain_key())
    current = current.decode() if isinstance(current, bytes) else current
    if current not in (None, my_job_id):
        return  # another chain owns the schedule; let this one end
    if not Run.objects.filter(status__in=(*Run.ACTIVE, Run.Status.PAUSED, Run.Status.SETTLING)).exists():
        conn.delete(chain_key())
        return
    job_id = queues.make_job_id("reaper", uuid.uuid4().hex[:12])
    conn.set(chain_key(), job_id, ex=interval_s() * 4)
    queues.queue(queues.SEARCH_QUEUE).enqueue_in(timedelta(seconds=interval_s()), "stark_web.studio.jobs.reap_job",
                                                 job_id=job_id, result_ttl=60)
