"""Per-user caps on the jobs a user can queue without starting a run: re-times of a node
(STARK_MAX_QUEUED_RETIMES) and diagnostics pings (STARK_MAX_QUEUED_PINGS). Beyond the cap the request is a 429
naming the limit and when to retry; nothing is queued. Staff are exempt from the re-time cap (as from the
active-runs cap), not from the ping cap (a ping is never needed twice at once)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from django.conf import settings
from rq.job import Job

from stark_web.studio.models import Node
from stark_web.studio.service import queues
from stark_web.studio.service.checks import LimitError
from stark_web.studio.service.retime import BUSY, job_alive

ALIVE = ("queued", "started", "deferred", "scheduled")
PING_TTL_S = 600  # a ping's bookkeeping outlives its job (timeout 60 s) even when the queue is backed up


class Refused(LimitError):
    """A 429 with the seconds after which a retry may succeed (the API adds it as `retry_after_s`)."""

    def __init__(self, field: str, message: str, retry_after_s: int) -> None:
        super().__init__(field, message)
        self.retry_after_s = retry_after_s


def check_retimes(user) -> None:
    """Refuse (429) a re-time when the user already has STARK_MAX_QUEUED_RETIMES queued or running, on any run
    (the ones a finished run queued for itself count too: they hold the same gpu workers)."""
    limit = settings.STARK_MAX_QUEUED_RETIMES
    if not limit or user.is_staff:
        return
    busy = Node.objects.filter(run__owner=user, result__retime__state__in=BUSY)
    alive = [(run, node) for run, node, result in busy.values_list("run_id", "node_id", "result")[:limit * 4]
             if job_alive(((result or {}).get("retime") or {}).get("job", ""))]
    if len(alive) >= limit:
        shown = ", ".join(f"run {run} node {node}" for run, node in alive[:10])
        raise Refused("node", f"you already have {len(alive)} re-times queued or running ({shown}); the limit is "
                              f"{limit} per user (STARK_MAX_QUEUED_RETIMES). Retry when one has finished (a re-time "
                              "takes about a minute)", retry_after_s=60)


def ping_key(user_id: int) -> str:
    return queues.redis_key("pings", str(int(user_id)))


def queue_ping(user, enqueue: Callable[[], Any]) -> Any:
    """Run `enqueue` (which queues one diagnostics ping and returns its job) unless the user already has
    STARK_MAX_QUEUED_PINGS pings queued or running: then a 429 and nothing is queued."""
    limit = settings.STARK_MAX_QUEUED_PINGS
    conn = queues.connection()
    key = ping_key(user.pk)
    now = time.time()
    conn.zremrangebyscore(key, "-inf", now - PING_TTL_S)
    ids = [raw.decode() for raw in conn.zrange(key, 0, -1)]
    jobs = Job.fetch_many(ids, connection=conn) if ids else []
    done = [job_id for job_id, job in zip(ids, jobs, strict=True) if job is None or job.get_status() not in ALIVE]
    if done:
        conn.zrem(key, *done)
    pending = len(ids) - len(done)
    if pending >= limit:
        raise Refused("ping", f"you already have {pending} diagnostics pings queued; the limit is {limit} per user "
                              "(STARK_MAX_QUEUED_PINGS). Retry when their pongs have arrived (a few seconds)",
                      retry_after_s=5)
    job = enqueue()
    conn.zadd(key, {job.id: now})
    conn.expire(key, PING_TTL_S)
    return job
