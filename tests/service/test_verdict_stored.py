"""In the service: when a re-time lands, every figure is recomputed by search.engine.verdict and stored
(node.speed with node.speed events, run.verdict); no other attempt is rescaled through it, and attempts whose search
figure still beats the re-timed one become contenders before a winner is named. Real SQLite rows, real Redis."""

from __future__ import annotations

import time

import pytest

from kernels.parent.problem import reference_candidate
from stark_web.studio.models import Event, Node, Problem, Run, source_hash
from stark_web.studio.service import queues, retime
from stark_web.studio.service.runs import locked_run
from tests.engine.fixtures.contenders import PROBLEM

pytestmark = pytest.mark.django_db(transaction=True)

TIMES = {0: 36.552, 1: 35.9, 4: 26.6, 7: 3.552, 9: 19.7}  # the CPU gallery run
PARENTS = {0: None, 1: 0, 4: 1, 7: 4, 9: 0}


def gallery_run(owner) -> Run:
    problem = Problem.objects.create(owner=owner, hash=source_hash(PROBLEM), name="gallery", source=PROBLEM)
    run = Run.objects.create(owner=owner, problem=problem, name="gallery", team="rules", status="finished",
                             budget=10, attempts=4, best_node=7, stop_reason="budget used")
    now = time.time()
    for attempt, (node_id, ms) in enumerate(TIMES.items()):
        source = reference_candidate(PROBLEM) if node_id == 0 else f"{reference_candidate(PROBLEM)}\n# attempt {node_id}\n"
        Node.objects.create(run=run, node_id=node_id, parent=PARENTS[node_id], attempt=attempt,
                            role="root" if node_id == 0 else "plan+code", source=source, runtime_ms=ms,
                            created_at=now, finished_at=now, usage={}, status="done", verdict="pass")
    with locked_run(run.pk) as locked:
        retime.apply_verdict(locked)
    return Run.objects.get(pk=run.pk)


def figures(run: Run) -> dict[int, float]:
    return {n.node_id: n.speed["value"] for n in Node.objects.filter(run=run)}


def test_a_re_time_that_finds_the_search_10x_optimistic_moves_only_that_figure(owner, redis_client) -> None:
    run = gallery_run(owner)
    before = figures(run)
    assert run.best_node == 7 and run.winner == "attempt" and round(before[7], 1) == 10.3
    run.meta = {retime.CONTENDERS: {"search_best": 7, "nodes": [7]}}
    run.save()
    Node.objects.filter(run=run, node_id=7).update(result={"retime": {
        "state": "done", "speedup": 1.36, "spread": {"low": 1.3, "high": 1.42}, "unstable": False,
        "candidate": {"median_ms": 26.9}, "reference": {"median_ms": 36.6}, "job": "j"}})
    last = run.last_seq
    with locked_run(run.pk) as locked:
        retime.apply_verdict(locked)
        more = retime.settle_winner(locked)
    after = figures(run)
    assert after[7] == 1.36 and all(after[k] == before[k] for k in (0, 1, 4, 9)), after
    stored = {n.node_id: n.speed for n in Node.objects.filter(run=run)}
    assert stored[9]["not_retimed"] and stored[7]["runtime_ms"] == 26.9
    changed = set(Event.objects.filter(run=run, type="node.speed", seq__gt=last).values_list("node", flat=True))
    assert changed == {1, 4, 7, 9}  # 7's figure, the others' "not re-timed" mark; nothing rescaled
    assert more == [9, 4]  # their search figures (1.86x, 1.37x) beat 1.36x less the margin: re-timed before a winner
    run.refresh_from_db()
    assert run.meta[retime.CONTENDERS]["nodes"] == [7, 9, 4] and "winner" not in run.meta[retime.CONTENDERS]
    retime.request_all(run, more)
    assert len(queues.queue(queues.GPU_QUEUE)) == 2
