"""One user cannot hold every search worker: their agents' steps beyond their share (every search worker but one by
default) are scheduled again later, so another user's step starts while theirs hang."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from stark_web.studio.service import queues, search_share
from tests.service.conftest import Workers


@pytest.mark.django_db
def test_a_users_slots_are_counted_across_workers_and_leases_end(redis_client, settings) -> None:
    settings.STARK_SEARCH_SHARE_PER_USER = 2
    assert search_share.claim(1, "a") is None and search_share.claim(1, "b") is None
    ttl = redis_client.zscore(search_share._key(1), "a") - time.time()
    assert 0 < ttl <= search_share.LEASE_S  # a killed worker's slot frees itself soon
    assert search_share.claim(1, "c") == 2  # the third of user 1: refused
    assert search_share.claim(2, "x") is None  # another user's first: taken
    search_share.release(1, "a")
    assert search_share.claim(1, "c") is None
    settings.STARK_SEARCH_SHARE_PER_USER = 0  # every live search worker but one, at least one
    assert search_share.share() == 1
    with search_share.slot(3) as first, search_share.slot(3) as second:
        assert first and not second
    with search_share.slot(3) as again:  # given back when the step ended
        assert again


@pytest.mark.django_db
def test_an_agents_step_over_its_users_share_is_scheduled_again_with_the_node(redis_client, settings, owner) -> None:
    from rq.registry import ScheduledJobRegistry

    from stark_web.studio import jobs
    from stark_web.studio.models import Node, Problem, Run

    problem = Problem.objects.create(owner=owner, name="p", source="# p\n", hash="2" * 64)
    run = Run.objects.create(owner=owner, problem=problem, team="scripted", status="running")
    node = Node.objects.create(run=run, node_id=1, parent=0, attempt=1, role="code", status="selected",
                               phase="expand", tries=1, job_id=queues.expand_job_id(1, 1), created_at=time.time())
    settings.STARK_SEARCH_SHARE_PER_USER = 1
    assert search_share.claim(owner.pk, "a hanging analysis") is None
    said = jobs.expand_attempt(run.pk, node.pk, 1)
    assert "share of the search workers is full" in said, said
    node.refresh_from_db()
    assert node.claim == "" and "-again-" in node.job_id  # not claimed; the node's job is the scheduled one
    assert node.job_id in ScheduledJobRegistry(queue=queues.queue(queues.SEARCH_QUEUE)).get_job_ids()


@pytest.mark.slow
def test_another_users_step_starts_while_one_user_holds_steps_on_both_workers(start_worker, redis_client,
                                                                              tmp_path: Path) -> None:
    """Three hostile analyses (each hanging to its deadline) kept both search workers busy ~2 minutes; other users'
    runs waited. Two real search workers: the hostile user's three 30 s steps, then another user's step."""
    workers = Workers(start_worker)
    workers.start("search", "--with-scheduler")
    workers.start("search")
    queue = queues.queue(queues.SEARCH_QUEUE)
    deadline = time.monotonic() + 60
    while search_share.search_workers() < 2:
        assert time.monotonic() < deadline, "the search workers did not register"
        time.sleep(0.2)
    for k in range(3):
        queue.enqueue("tests.service.share_jobs.step", 101, 30.0, str(tmp_path), f"hostile{k}")
    time.sleep(2.0)  # both workers have taken a hostile step by now
    asked = time.time()
    queue.enqueue("tests.service.share_jobs.step", 202, 0.0, str(tmp_path), "other")
    deadline = time.monotonic() + 20
    while not (tmp_path / "other.started").exists():
        assert time.monotonic() < deadline, sorted(p.name for p in tmp_path.iterdir())
        time.sleep(0.1)
    waited = float((tmp_path / "other.started").read_text()) - asked
    running = [p for p in tmp_path.iterdir() if p.name.startswith("hostile") and p.name.endswith(".started")]
    assert len(running) == 1, sorted(p.name for p in tmp_path.iterdir())  # one hostile step at a time
    assert any(p.name.endswith(".deferred") for p in tmp_path.iterdir())
    assert waited < 10, waited
    print(f"\nanother user's step started {waited:.1f} s after it was queued, beside one of three hostile steps")
