"""Fair sharing of the gpu workers between runs: when several runs are running, each may keep at most
its max-min fair share of the gpu workers' slots in flight (never less than one attempt, never more
than its own k). A lone run keeps its whole k, so its agents can work while a candidate is evaluated."""

from __future__ import annotations

from rq import Worker

from search.models import Run
from search.service import queues


def max_min_shares(capacity: int, demands: dict[int, int]) -> dict[int, int]:
    """Split `capacity` slots one at a time, round-robin over the runs that still want more (water filling):
    no run gets more than it asks for, and no run could get more without another getting less than it."""
    shares = {key: 0 for key in demands}
    wanting = sorted(key for key, want in demands.items() if want > 0)
    left = capacity
    while left > 0 and wanting:
        for key in list(wanting):
            if left == 0:
                break
            shares[key] += 1
            left -= 1
            if shares[key] >= demands[key]:
                wanting.remove(key)
    return {key: max(1, share) for key, share in shares.items()}


def gpu_workers() -> int:
    conn = queues.connection()
    return Worker.count(connection=conn, queue=queues.queue(queues.GPU_QUEUE))


def parallel_now(run: Run) -> int:
    """How many attempts this run may have in flight now: its k, or its fair share under contention."""
    demands = dict(Run.objects.filter(status=Run.Status.RUNNING).exclude(pk=run.pk).values_list("pk", "parallel"))
    if not demands:
        return max(1, run.parallel)
    demands[run.pk] = max(1, run.parallel)
    capacity = max(gpu_workers(), len(demands))
    return max_min_shares(capacity, demands)[run.pk]
