"""Fair sharing of the gpu workers between runs: when several runs are running, each may keep at most
its max-min fair share of the gpu workers' slots in flight (never less than one attempt, never more
than its own k). A lone run keeps its whole k, so its agents can work while a candidate is evaluated.
Between users: at most STARK_MAX_ACTIVE_RUNS queued, running or paused runs per user (staff exempt)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from rq import Worker

from stark_web.studio.models import Run
from stark_web.studio.service import queues
from stark_web.studio.service.checks import LimitError

ACTIVE = (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.PAUSED)


def active_run_limit(owner) -> int | None:
    """How many active runs `owner` may have: STARK_MAX_ACTIVE_RUNS, or None (no limit: 0, or staff)."""
    limit = settings.STARK_MAX_ACTIVE_RUNS
    return None if not limit or owner.is_staff else int(limit)


def check_active_runs(owner) -> None:
    """Raise LimitError (429) when `owner` already has STARK_MAX_ACTIVE_RUNS active runs. Call it inside the
    transaction that creates or restarts the run: it locks the user's row (PostgreSQL; SQLite's IMMEDIATE
    transactions already serialize writers), so two requests at once cannot both take the last slot."""
    limit = active_run_limit(owner)
    if limit is None:
        return
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    active = list(Run.objects.filter(owner=owner, status__in=ACTIVE).order_by("pk").values_list("pk", flat=True))
    if len(active) >= limit:
        shown = ", ".join(str(pk) for pk in active[:10])
        raise LimitError("runs", f"you already have {len(active)} active runs (queued, running or paused: {shown}); "
                                 f"the limit is {limit} per user (STARK_MAX_ACTIVE_RUNS). Cancel one or wait for "
                                 "one to finish, then try again")


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
