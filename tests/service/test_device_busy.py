"""A run whose reference finds the GPU full of other processes' memory, through the service: real search and gpu
workers (the rq scheduler runs the waits), real harness children under bubblewrap, SQLite and Redis. The only fake
is the GPU edge (tests/kernels/busy_gpu.py: torch says other processes hold 79.5 GiB and forward raises CUDA's OOM
until an instant written into the problem, since a bubblewrapped child can reach no file of the test)."""

from __future__ import annotations

import time

import pytest

from tests.engine.helpers import PROBLEM
from tests.kernels.busy_gpu import busy_problem
from tests.service.conftest import Workers
from tests.service.helpers import CHEAP_EVAL, run_finished, wait_for

pytestmark = pytest.mark.slow  # workers and harness children


def start_workers(start_worker, first_wait_s: float, wait_s: float) -> Workers:  # noqa: ANN001
    """Both workers; the harness reruns a busy child once after 0.5 s, the search waits first_wait_s, doubling,
    up to wait_s in all."""
    w = Workers(start_worker)
    w.start("search", "--with-scheduler", STARK_DEVICE_BUSY_FIRST_WAIT_S=str(first_wait_s),
            STARK_DEVICE_BUSY_WAIT_S=str(wait_s))
    w.start("gpu", STARK_DEVICE_BUSY_RERUNS_S="0.5")
    return w


def busy_run(owner, busy_for_s: float, attempts_only: bool = False):  # noqa: ANN001
    """A scripted run of one attempt on a problem whose GPU is full for `busy_for_s` seconds from now (with
    `attempts_only`, for the attempt's evaluations only). The problem is stored with the plain problem's check (the
    upload check would find the GPU full as well)."""
    from stark_web.studio.service import checks
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    summary = checks.check_problem(PROBLEM, owner.pk)
    source = busy_problem(PROBLEM, busy_until=time.time() + busy_for_s, attempts_only=attempts_only)
    problem = problem_for(owner, source, "busy_gpu.py", summary=summary)
    settings = parse_run_settings({"team": "scripted", "budget": 1, "eval": CHEAP_EVAL,
                                   "team_options": {"script": "ok"}})
    return create_run(owner, problem, settings)


def statuses(run_id: int) -> list[str]:
    from stark_web.studio.models import Event

    return [e.payload.get("reason", "") for e in Event.objects.filter(run_id=run_id, type="run.status").order_by("seq")]


@pytest.mark.django_db(transaction=True)
def test_a_reference_the_gpu_refuses_at_first_is_evaluated_again_and_the_run_finishes(start_worker, redis_client,
                                                                                       owner):
    from stark_web.studio.models import Node

    start_workers(start_worker, first_wait_s=2, wait_s=300)
    run = busy_run(owner, busy_for_s=20)
    run = wait_for(run_finished(run.pk), 600, "the run to finish")
    assert run.status == "finished", (run.status, run.error)
    root = Node.objects.get(run=run, node_id=0)
    assert root.verdict == "pass" and Node.objects.get(run=run, node_id=1).verdict == "pass"
    busy = run.meta["device_busy"]["0"]["evaluations"]
    assert busy >= 2  # a busy evaluation takes seconds: the first two fall in the busy 20 s (waits 2 s, 4 s, ...)
    reasons = statuses(run.pk)
    waiting = [r for r in reasons if r.startswith("waiting for the GPU")]
    assert len(waiting) == busy == root.agent_log.count("waiting for the GPU"), (reasons, root.agent_log)
    assert waiting[0].startswith("waiting for the GPU: other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free); "
                                 "the reference is evaluated again in 2 s (waited 0 s of at most 300 s")
    after = reasons[reasons.index(waiting[-1]) + 1:]
    assert after and after[0] == ""  # the wait is over: the status line is cleared
    assert run.to_dict()["reason"] == "" and "status_line" not in run.meta


@pytest.mark.django_db(transaction=True)
def test_a_reference_the_gpu_refuses_for_ever_fails_the_run_with_the_device_busy_message(start_worker, redis_client,
                                                                                         owner):
    from stark_web.studio.models import Node

    start_workers(start_worker, first_wait_s=1, wait_s=3)
    run = busy_run(owner, busy_for_s=10**6)
    run = wait_for(run_finished(run.pk), 600, "the run to fail")
    root = Node.objects.get(run=run, node_id=0)
    assert run.status == "failed" and root.verdict == "device_busy" and run.attempts == 0
    assert run.meta["device_busy"]["0"] == {"evaluations": 3, "waited_s": 3.0}  # waits of 1 and 2 s
    assert run.error.startswith("the GPU stayed busy with other processes through 3 evaluation(s) of the reference "
                                "and 3 s of waiting (STARK_DEVICE_BUSY_WAIT_S=3); the problem is not broken.")
    assert "2 tries" in run.error and "run fewer evaluations per GPU" in run.error
    assert "reference itself did not pass" not in run.error and run.to_dict()["reason"] == ""
    assert [r for r in statuses(run.pk) if r.startswith("waiting")][1].endswith(
        "the reference is evaluated again in 2 s (waited 1 s of at most 3 s (STARK_DEVICE_BUSY_WAIT_S))")


@pytest.mark.django_db(transaction=True)
def test_an_attempt_the_gpu_refuses_once_is_evaluated_again_not_debugged(start_worker, redis_client, owner):
    from stark_web.studio.models import Node

    # The attempt's GPU is full for 25 s from now: its first evaluation falls in them (the reference's evaluation
    # and the scripted agents take far less), and the first wait, 25 s, takes the second one past them.
    start_workers(start_worker, first_wait_s=25, wait_s=300)
    run = busy_run(owner, busy_for_s=25, attempts_only=True)
    run = wait_for(run_finished(run.pk), 600, "the run to finish")
    assert run.status == "finished", (run.status, run.error)
    assert run.meta["device_busy"] == {"1": {"evaluations": 1, "waited_s": 25.0}}, run.meta.get("device_busy")
    nodes = list(Node.objects.filter(run=run).order_by("node_id"))
    assert [(n.node_id, n.role, n.verdict) for n in nodes] == [(0, "root", "pass"), (1, "plan+code", "pass")]
    attempt = nodes[1]
    assert attempt.tries == 2 and "attempt 1 is evaluated again in 25 s" in attempt.agent_log
    assert not [r for r in statuses(run.pk) if r.startswith("waiting")]  # an attempt's wait is its own log
