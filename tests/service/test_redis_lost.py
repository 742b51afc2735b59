"""Redis restarting empty mid-run (every queued job, result and dependency gone) loses no node and no
event: the tree and the events are in the database, and the reaper re-queues the lost work."""

from __future__ import annotations

import pytest

from tests.service.helpers import assert_tree_consistent, make_run, run_finished, wait_for

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)


@pytest.mark.django_db(transaction=True)
def test_it_survives_redis_losing_everything(workers, reaper, owner, redis_client):
    from stark_web.studio.models import Event, Node
    from tests.service.helpers import CHEAP_EVAL

    # an evaluation of seconds (a harness child's start alone takes a few), so Redis is flushed while one is in
    # flight: the flush follows within 0.3 s of the node being sent, never after its result was recorded
    run = make_run(owner, team="scripted", budget=2, team_options={"script": "ok:0.5"},
                   eval={**CHEAP_EVAL, "reuse_results": False})
    wait_for(lambda: Node.objects.filter(run=run, node_id__gt=0, phase="evaluate").first(), 300,
             "a child to be sent for evaluation")
    events_before = list(Event.objects.filter(run=run).values_list("seq", "type"))
    redis_client.flushdb()  # what a Redis restart without persistence leaves

    run = wait_for(run_finished(run.pk), 400, "the run to finish after Redis lost its jobs")
    assert run.status == "finished", (run.status, run.error)
    assert run.attempts == run.budget == 2
    assert_tree_consistent(run)
    assert Node.objects.filter(run=run).count() == 3
    assert list(Event.objects.filter(run=run, seq__lte=len(events_before)).values_list("seq", "type")) \
        == events_before
    lost = [n for n in Node.objects.filter(run=run) if "gone from Redis" in n.agent_log]
    assert lost and all(n.verdict == "pass" for n in lost), [(n.node_id, n.agent_log) for n in lost]
