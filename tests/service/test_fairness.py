"""Max-min fair shares of the gpu workers between running runs."""

from __future__ import annotations

import pytest

from stark_web.studio.service.fairness import max_min_shares


@pytest.mark.parametrize("capacity, demands, shares", [
    (4, {1: 8, 2: 1}, {1: 3, 2: 1}),          # the small run gets all it asks, the big one the rest
    (4, {1: 8, 2: 8}, {1: 2, 2: 2}),          # equal split
    (5, {1: 8, 2: 8}, {1: 3, 2: 2}),          # the odd slot goes round-robin
    (6, {1: 1, 2: 2, 3: 8}, {1: 1, 2: 2, 3: 3}),
    (2, {1: 4, 2: 4, 3: 4}, {1: 1, 2: 1, 3: 1}),  # more runs than slots: everyone still goes on
    (16, {1: 2, 2: 3}, {1: 2, 2: 3}),         # no one gets more than its own k
])
def test_shares_are_max_min_fair(capacity, demands, shares):
    assert max_min_shares(capacity, demands) == shares


@pytest.mark.django_db
def test_a_lone_run_keeps_its_whole_parallelism(owner, redis_client):
    from stark_web.studio.models import Problem, Run
    from stark_web.studio.service.fairness import parallel_now

    problem = Problem.objects.create(owner=owner, name="p", source="# p\n", hash="1" * 64)
    alone = Run.objects.create(owner=owner, problem=problem, team="scripted", parallel=4, status="running")
    assert parallel_now(alone) == 4
    Run.objects.create(owner=owner, problem=problem, team="scripted", parallel=4, status="running")
    assert parallel_now(alone) == 1  # two runs, no gpu worker registered: one slot each
