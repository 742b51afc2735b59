"""The service drives the engine only through its seam (Engine.schedule, finish_reason, retry, record, fail) and
builds a run's team only to expand: cancelling, recording and scheduling need no agents, so the web process
cancels an LLM run without any API key. Real SQLite, real team registry; no workers needed."""

from __future__ import annotations

import pytest

from tests.service.helpers import CHEAP_EVAL, PROBLEM_PATH, problem_source

pytestmark = [pytest.mark.django_db, pytest.mark.slow]  # creating a run checks its problem in a child process
ROOT_RESULT = {"verdict": "pass", "reasons": [], "timing": {"median_ms": 2.0}, "speedup_vs_eager": 1.0}


@pytest.fixture
def llm_run(owner, monkeypatch):
    """A stark run created while the server has a key; then the key is gone (as in a web process without keys)."""
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    problem = problem_for(owner, problem_source(), PROBLEM_PATH.name)
    run = create_run(owner, problem, parse_run_settings({"team": "stark", "budget": 3, "parallel": 2,
                                                         "eval": CHEAP_EVAL}))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "STARK_LLM_API_KEY", "STARK_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return run


def test_the_run_records_its_teams_selection(llm_run) -> None:
    assert llm_run.settings["policy"]["name"] == "adaptive-egreedy" and llm_run.settings["can_debug"] is True


def test_building_the_team_now_fails_without_a_key(llm_run) -> None:
    from stark_web.studio.service.runs import make_team

    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        make_team(llm_run)


def test_cancel_builds_no_team(llm_run) -> None:
    from stark_web.studio.models import Node, Run
    from stark_web.studio.service import control

    control.cancel(llm_run.pk)
    llm_run.refresh_from_db()
    assert llm_run.status == Run.Status.CANCELLED and llm_run.stop_reason == "cancelled by the user"
    root = Node.objects.get(run=llm_run, node_id=0)
    assert root.status == "failed" and root.verdict == "interrupted"


def record_root_and_schedule(llm_run):
    """The run running, its reference recorded as passed, and its first attempts scheduled: the engine used."""
    from stark_web.studio.models import Run
    from stark_web.studio.service import steps
    from stark_web.studio.service.runs import locked_run

    with locked_run(llm_run.pk) as run:
        run.status = Run.Status.RUNNING
        run.save(update_fields=["status"])
        engine = steps.engine_of(run)
        engine.record(0, ROOT_RESULT)
        steps.schedule(run, engine)
    return engine


def test_recording_and_scheduling_build_no_team(llm_run) -> None:
    from stark_web.studio.models import Node

    assert not record_root_and_schedule(llm_run).team_built
    children = list(Node.objects.filter(run=llm_run, node_id__gt=0).order_by("node_id"))
    assert [(c.status, c.phase, c.parent) for c in children] == [("selected", "expand", 0)] * 2  # k = 2


def test_a_lost_phase_is_retried_through_the_engine(llm_run) -> None:
    from stark_web.studio.models import Node
    from stark_web.studio.service import steps

    record_root_and_schedule(llm_run)
    child = Node.objects.filter(run=llm_run, node_id=1).get()
    Node.objects.filter(pk=child.pk).update(status="coding")
    assert steps.retry_lost_expand(llm_run.pk, child.pk, 1, "its worker was killed") == \
        f"node pk {child.pk}: agents retried"
    child.refresh_from_db()
    assert child.status == "selected" and child.tries == 2
    assert "agents' try 1 lost: its worker was killed; retrying once" in child.agent_log


def test_each_expand_jobs_team_starts_its_meter_at_the_runs_spend(owner, monkeypatch) -> None:
    """Every expand job builds its own team; with a cost limit, its meter starts at what the run spent so far."""
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.runs import make_team
    from stark_web.studio.service.settings import parse_run_settings

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-not-a-real-key")
    problem = problem_for(owner, problem_source(), PROBLEM_PATH.name)
    run = create_run(owner, problem, parse_run_settings({"team": "stark", "budget": 3, "cost_limit_usd": 0.5,
                                                         "eval": CHEAP_EVAL}))
    team = make_team(run, spent_usd=0.4)
    assert team.plan is not None
    meter = team.plan.client.meter
    assert meter.limit_usd == 0.5 and meter.spent_usd == pytest.approx(0.4)
    assert make_team(run).plan.client.meter.spent_usd == 0.0
