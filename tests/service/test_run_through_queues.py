"""A whole run goes through the real queues: search steps on one worker, evaluations on a gpu worker;
then its winner is downloaded and re-checked on its own, and the finished run is extended and forked."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

import pytest
from django.test import Client

from tests.service.helpers import assert_tree_consistent, make_run, run_finished, wait_for

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


@pytest.mark.django_db(transaction=True)
def test_it_completes_a_scripted_run(workers, owner, tmp_path):
    from stark_web.studio.models import Run
    from stark_web.studio.tokens import create_token

    run = make_run(owner, team="scripted", budget=3, parallel=2, team_options={"script": "ok:0.5,fail,ok"})
    other = make_run(owner, team="scripted", budget=1, seed=7)  # a second run shares the same workers
    run = wait_for(run_finished(run.pk), 400, "the run to finish")
    other = wait_for(run_finished(other.pk), 400, "the other run to finish")
    assert (other.status, other.attempts) == ("finished", 1)
    assert_tree_consistent(other)
    assert run.status == "finished", (run.status, run.error)
    assert run.attempts == 3
    assert_tree_consistent(run)
    nodes = {n.node_id: n for n in run.nodes.all()}
    assert len(nodes) == 4
    assert nodes[0].verdict == "pass" and nodes[0].runtime_ms > 0
    assert run.reference_runtime_ms == nodes[0].runtime_ms
    assert run.best_node is not None and nodes[run.best_node].verdict == "pass"
    assert any(n.verdict in ("build_error", "runtime_error") for n in nodes.values())
    assert all(n.phase == "" and n.claim == "" for n in nodes.values())

    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    bundle = client.get(f"/api/runs/{run.pk}/bundle.zip")
    assert bundle.status_code == 200
    with zipfile.ZipFile(io.BytesIO(bundle.content)) as z:
        assert {"kernel.py", "problem.py", "check_and_time.py", "report.json", "report.md",
                "environment.json", "README.txt"} <= set(z.namelist())
        z.extractall(tmp_path)
    # the winner: the best attempt, or the reference itself when no attempt beat it
    assert f"node {0 if run.winner == 'reference' else run.best_node}" in (tmp_path / "report.md").read_text()
    check = subprocess.run([sys.executable, "check_and_time.py", "--runs", "3", "--warmup", "1", "--trials", "2"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stderr
    assert "correct on 2 trials" in check.stdout and "speed-up" in check.stdout

    # Extend the finished run by one attempt: it goes on from where it stopped.
    response = client.post(f"/api/runs/{run.pk}/extend", {"budget": "1"}, content_type="application/json")
    assert response.status_code == 200, response.content
    run = wait_for(run_finished(run.pk), 300, "the extended run to finish")
    assert (run.status, run.attempts, run.budget) == ("finished", 4, 4)
    assert_tree_consistent(run)

    # Fork from the winner: a new run whose root is the winner's candidate.
    response = client.post(f"/api/runs/{run.pk}/fork", {"node": run.best_node, "budget": 1},
                           content_type="application/json")
    assert response.status_code == 201, response.content
    fork = Run.objects.get(pk=response.json()["id"])
    assert fork.nodes.get(node_id=0).source == run.nodes.get(node_id=run.best_node).source
    assert (fork.forked_from_run_id, fork.forked_from_node, fork.budget) == (run.pk, run.best_node, 1)
    assert client.post(f"/api/runs/{fork.pk}/cancel").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_it_completes_a_rules_run(workers, owner):
    run = make_run(owner, team="rules", budget=1)
    run = wait_for(run_finished(run.pk), 600, "the rules run to finish")
    assert run.status == "finished", (run.status, run.error)
    assert run.attempts == 1
    assert_tree_consistent(run)
    children = list(run.nodes.exclude(node_id=0))
    assert all(n.instruction and n.anchored_source and n.source for n in children)
    assert all(n.result is not None for n in children if n.verdict not in ("malformed", "agent_error"))
