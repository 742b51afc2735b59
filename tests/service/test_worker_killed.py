"""A gpu worker SIGKILLed mid-evaluation loses nothing: the periodic reaper retries the attempt, the run
finishes when a worker is back, attempts == budget and no node is duplicated."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable

import pytest

from tests.service.helpers import assert_tree_consistent, make_run, run_finished, wait_for

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


def evaluation_started(run_id: int):
    """A child node (not the root) whose evaluation job a worker has started."""
    from stark_web.studio.models import Node
    from stark_web.studio.service import queues

    def check():
        for row in Node.objects.filter(run_id=run_id, phase="evaluate", node_id__gt=0):
            job = queues.fetch(row.job_id)
            if job is not None and job.get_status() == "started":
                return row
        return None

    return check


def signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def kill_tree_if(root: int, unfinished: Callable[[], bool]) -> bool:
    """Freeze (SIGSTOP) root and every descendant (rq's work horse runs in a process group of its own, and so may
    the harness child it started, so the worker's group is not the whole tree), then SIGKILL them all if
    unfinished() still holds, else let them go on. A frozen tree cannot finish the evaluation in between."""
    from kernels.shared.process_tree import descendants

    frozen = [root, *descendants(root)]
    signal_all(frozen, signal.SIGSTOP)
    if unfinished():
        signal_all(frozen, signal.SIGKILL)  # nothing in the tree could start another process since
        return True
    signal_all(frozen, signal.SIGCONT)
    return False


def unfinished_on(job_id: str, worker: str | None = None) -> Callable[[], bool]:
    """The job is still running (on `worker`, when named) and has no result yet."""
    from stark_web.studio.service import queues

    def check() -> bool:
        job = queues.fetch(job_id)
        return (job is not None and job.get_status() == "started" and job.latest_result() is None
                and (worker is None or job.worker_name == worker))

    return check


def kill_mid_evaluation(gpu, run_id: int):
    """SIGKILL the gpu worker, its work horse and the evaluation's processes while a child's evaluation is running
    (kill_tree_if); an evaluation that finished first lets the worker go on to the next one."""
    while True:
        victim = wait_for(evaluation_started(run_id), 300, "a child's evaluation to start")
        if kill_tree_if(gpu.pid, unfinished_on(victim.job_id)):
            gpu.wait()
            return victim


@pytest.mark.django_db(transaction=True)
def test_it_survives_a_gpu_worker_killed_mid_evaluation(workers, owner):
    from stark_web.studio.models import Node
    from tests.service.helpers import CHEAP_EVAL

    # A stored result would let the evaluation finish before the kill lands: judge afresh every time.
    run = make_run(owner, team="scripted", budget=2, team_options={"script": "ok:0.5"},
                   eval={**CHEAP_EVAL, "reuse_results": False})  # seconds: two harness children start
    victim = kill_mid_evaluation(workers.procs["gpu"][0], run.pk)
    # No gpu worker is left to clean up after the dead one: the reaper, scheduled by the search worker's rq
    # scheduler, must find the abandoned evaluation and queue it again.
    wait_for(lambda: Node.objects.get(pk=victim.pk).tries == 2, 120, "the reaper to retry the lost evaluation")
    workers.start("gpu")

    run = wait_for(run_finished(run.pk), 400, "the run to finish after the kill")
    assert run.status == "finished", (run.status, run.error)
    assert run.attempts == run.budget == 2
    assert_tree_consistent(run)
    assert Node.objects.filter(run=run).count() == 3
    node = Node.objects.get(pk=victim.pk)
    assert node.tries == 2, node.agent_log
    assert "lost" in node.agent_log and "retrying once" in node.agent_log
    assert node.verdict == "pass", (node.verdict, node.reasons)
    # The lost try is visible in the events too (the log line arrived through a node event's changes).
    from stark_web.studio.models import Event

    assert any("retrying once" in str(e.payload.get("changes", {}).get("agent_log", ""))
               for e in Event.objects.filter(run=run, node=node.node_id))


@pytest.mark.django_db(transaction=True)
def test_the_work_horse_and_the_harness_child_die_with_their_worker(start_worker, redis_client, owner, tmp_path):
    """rq runs each job in a work horse of its own process group: SIGKILL to the worker alone (not its tree) must
    still end the evaluation at once, or a late result would race the retry the reaper sends elsewhere."""
    from kernels.shared.process_tree import descendants
    from stark_web.studio.models import Node
    from stark_web.studio.service import queues
    from tests.service.conftest import Workers
    from tests.service.helpers import CHEAP_EVAL
    from tests.teams.processes import harness_children

    cache = tmp_path / "cache"
    workers = Workers(start_worker)
    workers.start("search", "--with-scheduler")
    # bubblewrap, as a server runs by default: without it the children fork from a warm zygote that outlives a job
    # by design (kernels.parent.isolation.zygote; it kills a child whose requester hung up)
    gpu = workers.start("gpu", STARK_CACHE_DIR=str(cache), STARK_SANDBOX="auto")
    run = make_run(owner, team="scripted", budget=1,
                   eval={**CHEAP_EVAL, "reuse_results": False, "timing_runs": 10000, "run_timeout_s": 600})

    def evaluating() -> bool:
        root = Node.objects.get(run=run, node_id=0)
        job = queues.fetch(root.job_id) if root.job_id else None
        return job is not None and job.get_status() == "started" and bool(harness_children(cache))

    wait_for(evaluating, 180, "the reference's evaluation to run in a harness child")
    tree = descendants(gpu.pid)
    assert tree, "the worker has a work horse"
    os.kill(gpu.pid, signal.SIGKILL)  # the worker only
    gpu.wait()
    wait_for(lambda: not harness_children(cache) and not [p for p in tree if alive(p)],
             10, "the work horse and the harness child to die with their worker", every=0.1)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its new parent to reap it is dead)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
