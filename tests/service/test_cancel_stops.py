"""Cancelling a run while its reference is being evaluated stops that evaluation at once: the harness child and
everything it started are gone within seconds (not left to finish a build or a timing loop for nothing)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.service.conftest import Workers
from tests.service.helpers import CHEAP_EVAL, make_run, wait_for
from tests.teams.processes import harness_children

pytestmark = pytest.mark.slow  # starts processes (workers, harness children)


@pytest.mark.django_db(transaction=True)
def test_a_cancel_during_the_reference_evaluation_kills_its_child_at_once(start_worker, redis_client, owner,
                                                                          tmp_path: Path) -> None:
    from stark_web.studio.models import Node, Run
    from stark_web.studio.service import control, queues

    cache = tmp_path / "cache"
    workers = Workers(start_worker)
    workers.start("search", "--with-scheduler")
    workers.start("gpu", STARK_CACHE_DIR=str(cache))
    # thousands of timing runs: the reference's evaluation would go on for a long while
    run = make_run(owner, team="scripted", budget=1,
                   eval={**CHEAP_EVAL, "reuse_results": False, "timing_runs": 10000, "run_timeout_s": 600})

    def timing_the_reference() -> bool:
        root = Node.objects.get(run=run, node_id=0)
        job = queues.fetch(root.job_id) if root.job_id else None
        phase = ((job.meta or {}).get("phase") or {}).get("phase", "") if job is not None else ""
        return job is not None and job.get_status() == "started" and bool(harness_children(cache)) and bool(phase)

    wait_for(timing_the_reference, 180, "the reference's evaluation to run in a harness child")
    job_id = Node.objects.get(run=run, node_id=0).job_id
    cancelled = time.monotonic()
    control.cancel(run.pk)
    assert Run.objects.get(pk=run.pk).status == "cancelled"
    wait_for(lambda: not harness_children(cache), 10, f"the harness child to go (left: {[line[-120:] for line in harness_children(cache)]})",
             every=0.1)
    gone_after = time.monotonic() - cancelled
    assert gone_after < 8, gone_after
    job = wait_for(lambda: (j := queues.fetch(job_id)) is not None and j.get_status() in ("failed", "stopped") and j,
                   30, "the stopped evaluation job to end")
    assert "stopped on request" in (job.latest_result().exc_string or ""), job.latest_result().exc_string
