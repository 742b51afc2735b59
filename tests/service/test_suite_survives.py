"""A suite survives a gpu worker SIGKILLed mid-evaluation and a restart of the search worker and the server while
members still wait for a slot: every (problem, team) ends with exactly one run, each at the suite's budget with a
consistent tree, and the server answers the same suite after its restart."""

from __future__ import annotations

import os
import signal
import sys

import pytest

from tests.service.helpers import CHEAP_EVAL, ROOT, assert_tree_consistent, wait_for
from tests.service.test_worker_killed import kill_mid_evaluation

pytestmark = pytest.mark.slow  # starts processes (workers, a server, harness children)

# Tiny problems: an evaluation still takes seconds (a harness child starts), long enough for the kill to land; the
# kill freezes the worker and checks the job first (kill_mid_evaluation), so a fast one is simply waited out.
PROBLEMS = {"tiny/relu_scale": "tests/engine/fixtures/tiny_relu_scale.py",
            "tiny/softmax": "tests/kernels/fixtures/problem_tiny_softmax.py"}


def make_suite(owner):
    from stark_web.studio.suites import service
    from stark_web.studio.suites.uploads import Upload

    uploads = [Upload(key, *key.split("/"), (ROOT / path).read_text()) for key, path in PROBLEMS.items()]
    teams = [{"label": "a", "team": "scripted", "team_options": {"script": "ok"}},
             {"label": "b", "team": "scripted", "team_options": {"script": "ok:2"}}]
    return service.create_suite(owner, "survivor", uploads, teams, 1,
                                {"eval": {**CHEAP_EVAL, "reuse_results": False}}, max_active=2)


def suite_evaluation_started(suite_id: int):
    """kill_mid_evaluation's check, over every run of the suite: (a row whose evaluation job started)."""
    from stark_web.studio.models import Node
    from stark_web.studio.service import queues

    def check():
        for row in Node.objects.filter(run__suite_member__suite_id=suite_id, phase="evaluate", node_id__gt=0):
            job = queues.fetch(row.job_id)
            if job is not None and job.get_status() == "started":
                return row
        return None

    return check


@pytest.mark.django_db(transaction=True)
def test_a_suite_survives_a_worker_kill_and_a_restart(workers, owner, processes, monkeypatch):
    from stark_web.studio.models import Node, Run
    from stark_web.studio.suites.models import Suite
    from stark_web.studio.tokens import create_token
    from tests import conftest as root_conftest

    token = create_token(owner)
    suite = make_suite(owner)
    monkeypatch.setattr("tests.service.test_worker_killed.evaluation_started", suite_evaluation_started)
    victim = kill_mid_evaluation(workers.procs["gpu"][0], suite.pk)
    assert Suite.objects.get(pk=suite.pk).members.filter(run__isnull=True).exists()  # members still wait
    try:
        wait_for(lambda: Node.objects.get(pk=victim.pk).tries == 2, 120, "the reaper to retry the lost evaluation")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; {started_registry(victim)}") from None

    # The search worker and the server restart (SIGTERM: what a deploy does) while the gpu worker is gone.
    search = workers.procs["search"][0]
    os.killpg(search.pid, signal.SIGTERM)
    search.wait(timeout=60)
    port = root_conftest.free_port()
    server = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "stark_web.asgi:application"]
    daphne = processes.start(server, f"daphne-{port}")
    url = f"http://127.0.0.1:{port}/api/suites/{suite.pk}"
    headers = {"Authorization": f"Bearer {token}"}
    before = wait_for(lambda: _get(url, headers), 60, "the server to answer")
    os.killpg(daphne.pid, signal.SIGTERM)
    daphne.wait(timeout=30)
    workers.start("search", "--with-scheduler")
    workers.start("gpu")
    processes.start(server, f"daphne-{port}-again")

    done = wait_for(lambda: Suite.objects.get(pk=suite.pk).status == "finished", 400, "the suite to finish", every=1)
    assert done
    members = list(Suite.objects.get(pk=suite.pk).members.select_related("run"))
    assert len(members) == 4 and all(m.run is not None and not m.error for m in members)
    runs = Run.objects.filter(owner=owner)
    assert runs.count() == 4 and len({m.run_id for m in members}) == 4  # none lost, none doubled
    for run in runs:
        assert run.status == "finished" and run.attempts == run.budget == 1, (run.pk, run.status, run.error)
        assert_tree_consistent(run)
    assert Node.objects.get(pk=victim.pk).verdict == "pass"  # the killed try was retried and judged
    after = wait_for(lambda: _get(url, headers), 60, "the restarted server to answer")
    assert [c["key"] for c in after["cells"]] == [c["key"] for c in before["cells"]]
    assert after["suite"]["counts"]["ended"] == 4 and set(after["metrics"]) == {"a", "b"}


def started_registry(victim) -> str:
    """What Redis says of the killed evaluation's job (for a failure message)."""
    import time

    from rq.registry import StartedJobRegistry

    from stark_web.studio.models import Node
    from stark_web.studio.service import queues

    row = Node.objects.get(pk=victim.pk)
    job = queues.fetch(row.job_id)
    conn = queues.connection()
    registry = StartedJobRegistry(queues.queue_name(queues.GPU_QUEUE), connection=conn)
    entries = conn.zrange(registry.key, 0, -1, withscores=True)
    return (f"node {row.node_id} phase {row.phase!r} tries {row.tries} job {row.job_id} status "
            f"{job.get_status() if job else None}; started registry at {time.time():.0f}: {entries}")


def _get(url: str, headers: dict[str, str]):
    import json
    import urllib.request

    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answer:
            return json.loads(answer.read())
    except OSError:
        return None
