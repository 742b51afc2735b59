"""A suite's LLM cost limit in the service (stark_web.studio.suites.spend), without workers: a suite with an LLM team
gets the default unless given one, each member starts with at most what the suite has left, and once the runs
together spent the limit the advance step stops the suite: members not started never start, active runs are
cancelled, each with the reason; the pages show the limits."""

from __future__ import annotations

import json

import pytest

from search.llm.pricing import DEFAULT_COST_LIMIT_USD, DEFAULT_SUITE_COST_LIMIT_USD
from stark_web.studio.models import Run
from stark_web.studio.suites import service
from stark_web.studio.suites.models import Suite
from tests.service.test_suites import client, level_zip  # noqa: F401 - the API client fixture

pytestmark = pytest.mark.django_db(transaction=True)

STARK = {"label": "stark", "team": "stark", "team_options": {"provider": "openai"}}
RULES = {"label": "rules", "team": "rules"}


@pytest.fixture(autouse=True)
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-suite-cost-000000000000")


def post(client, teams, **fields):  # noqa: F811
    import io

    archive = io.BytesIO(level_zip())
    archive.name = "kb.zip"
    return client.post("/api/suites", {"teams": json.dumps(teams), "budget": 2, "zip": archive, **fields})


def test_a_suite_with_an_llm_team_gets_the_default_limit_and_an_offline_one_none(client):  # noqa: F811
    llm = post(client, [STARK, RULES])
    assert llm.status_code == 201, llm.content
    assert client.get(llm.json()["api_url"]).json()["suite"]["cost_limit_usd"] == DEFAULT_SUITE_COST_LIMIT_USD
    offline = post(client, [RULES])
    assert client.get(offline.json()["api_url"]).json()["suite"]["cost_limit_usd"] is None
    bad = post(client, [STARK], suite_cost_limit_usd="-3")
    assert bad.status_code == 400 and bad.json()["field"] == "suite_cost_limit_usd", bad.json()
    assert "positive number of USD" in bad.json()["message"]


def test_the_suite_stops_its_remaining_runs_once_they_spent_its_limit(client, owner, settings):  # noqa: F811
    settings.STARK_MAX_ACTIVE_RUNS = 10
    answer = post(client, [STARK, RULES], suite_cost_limit_usd="1", cost_limit_usd="0.8", max_active="2")
    assert answer.status_code == 201, answer.content
    suite = Suite.objects.get(pk=answer.json()["id"])
    service.advance(suite.pk)
    first_llm, first_rules = (m.run for m in suite.members.order_by("position")[:2])
    assert first_llm.settings["cost_limit_usd"] == 0.8  # its own limit: under what the suite has left
    # The first LLM run spent 0.5 and ended: the next LLM member may spend only what is left.
    Run.objects.filter(pk=first_llm.pk).update(cost_usd=0.5, status="finished")
    Run.objects.filter(pk=first_rules.pk).update(status="finished")
    service.advance(suite.pk)
    second_llm = suite.members.order_by("position")[2].run
    assert second_llm.settings["cost_limit_usd"] == 0.5
    assert client.get(answer.json()["api_url"]).json()["suite"]["cost"] == {"limit_usd": 1.0, "spent_usd": 0.5}
    # It spends past the rest: the suite stops, saying why, everywhere.
    Run.objects.filter(pk=second_llm.pk).update(cost_usd=0.55)
    assert "suite cost limit reached" in service.advance(suite.pk)
    why = "suite cost limit reached: $1.0500 spent of $1 (suite_cost_limit_usd)"
    suite.refresh_from_db()
    assert suite.status == "finished" and suite.meta["stop_reason"] == why
    second_llm.refresh_from_db()
    assert second_llm.status == "cancelled" and second_llm.stop_reason == why
    body = client.get(answer.json()["api_url"]).json()
    assert body["suite"]["stop_reason"] == why
    pending = [c for c in body["cells"] if c["run"] is None]
    assert len(pending) == 2 and {c["error"] for c in pending} == {f"not started: {why}"}
    service.advance(suite.pk)
    assert Run.objects.filter(owner=owner).count() == 4  # nothing else starts
    extend = client.post(f"/api/suites/{suite.pk}/extend", json.dumps({"budget": 2}), content_type="application/json")
    assert extend.status_code == 409 and "start a new suite with a higher suite_cost_limit_usd" in extend.json()["message"]
    client.force_login(owner)
    page = client.get(f"/suites/{suite.pk}/").content.decode()
    assert "LLM cost limit of the suite: $1" in page and why in page


def test_the_new_suite_page_shows_both_default_limits(client, owner):  # noqa: F811
    client.force_login(owner)
    page = client.get("/suites/new/").content.decode()
    assert f"Cost limit per run (USD, default {DEFAULT_COST_LIMIT_USD:g} for LLM teams)" in page
    assert f"Cost limit of the suite (USD, default {DEFAULT_SUITE_COST_LIMIT_USD:g} with an LLM team)" in page
