"""The offline team traces a run's problem once per run, not once per expand job: every job builds the team
afresh (a new work-horse process), and the tracing children's answers come back from the run's Redis store.
Real Redis, real isolated tracing children."""

from __future__ import annotations

import pytest

from kernels.parent.problem import reference_candidate
from search.engine.context import build_window
from search.engine.tree import Tree
from tests.teams import rules_problems as P

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # tracing runs in harness children


def evaluated_root(problem: str) -> Tree:
    tree = Tree(problem, {"device": "cpu"}, root_source=reference_candidate(problem))
    tree[0].status, tree[0].verdict, tree[0].runtime_ms = "done", "pass", 1.0
    return tree


def expand_job(run_id: int, tree: Tree):  # noqa: ANN201
    """What one expand job does with the rules team: build the run's team afresh (as make_team does, with the
    run's store), plan and code one child of the root; the child is recorded correct."""
    from search.teams import get_team
    from stark_web.studio.service.trace_store import RedisTraceStore

    team = get_team("rules", {"device": "cpu", "target": "cpp", "seed": 0, "trace_store": RedisTraceStore(run_id)})
    child = tree.add_child(0, "plan+code", status="planning")
    plan = team.plan.plan(build_window(tree, "plan", 0, attempt=child.attempt, device={"device": "cpu"}))
    code = team.code.code(build_window(tree, "code", 0, attempt=child.attempt, device={"device": "cpu"}), plan)
    child.source = code.source
    child.status, child.verdict, child.runtime_ms = "done", "pass", 0.5
    return team, code.source


@pytest.fixture
def run_ids():
    from stark_web.studio.service import queues

    ids = [910_001, 910_002]
    yield ids
    conn = queues.connection()
    for run_id in ids:
        for key in conn.scan_iter(queues.redis_key("rules-trace", str(run_id), "*")):
            conn.delete(key)


def test_a_later_expand_job_of_the_run_starts_no_tracing_child(run_ids) -> None:
    tree = evaluated_root(P.MANY_OPS)
    first, first_source = expand_job(run_ids[0], tree)
    assert first.plan.ctx.calls == 1  # one child traced the problem and rendered every move from the root
    second, second_source = expand_job(run_ids[0], tree)
    assert second.plan.ctx.calls == 0, "the second expand job of the run traced the problem again"
    assert second_source != first_source  # another move, rendered by the first job's child
    other, _ = expand_job(run_ids[1], evaluated_root(P.MANY_OPS))
    assert other.plan.ctx.calls == 1  # the store is the run's: another run traces for itself
