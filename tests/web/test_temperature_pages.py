"""Temperatures a model refused, on the pages (Django's test client over real rows): the run header names each role
that ran without its temperature and why, the node's Agent tab shows asked vs sent per call with the note, and the
new-run form sends strict_temperatures."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from stark_web.studio.models import Node, Problem, Run, source_hash
from stark_web.studio.pages.forms import NewRunForm
from tests.kernels.conftest import RELU

pytestmark = pytest.mark.django_db

NOTE = ("m-notemp rejected temperature 0.8 for the plan agent (openai-compatible at http://stub/v1 refused the "
        "temperature (400: Unsupported value)); re-sent without it")


def call(role: str, asked: float, sent: float | None, dropped: str = "", note: str = "") -> dict:
    return {"role": role, "provider": "openai-compatible", "model": "m-notemp", "temperature": sent,
            "temperature_requested": asked, "temperature_dropped": dropped, "temperature_note": note,
            "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.0, "latency_s": 0.2, "notes": [note] if note else []}


def stored_run(owner, calls_of_node_1: list[dict]) -> Run:
    problem = Problem.objects.create(owner=owner, hash=source_hash(RELU), name="relu", source=RELU)
    run = Run.objects.create(owner=owner, problem=problem, team="stark", status="finished", budget=1, attempts=1)
    now = time.time()
    Node.objects.create(run=run, node_id=0, parent=None, attempt=0, role="root", status="done", verdict="pass",
                        source=RELU, runtime_ms=2.0, created_at=now, usage={})
    Node.objects.create(run=run, node_id=1, parent=0, attempt=1, role="plan+code", status="done", verdict="pass",
                        source=RELU, runtime_ms=1.0, created_at=now,
                        usage={"input_tokens": 20, "output_tokens": 10, "cost_usd": 0.0, "calls": calls_of_node_1})
    return run


def test_the_run_header_and_the_agent_tab_say_a_role_ran_without_its_temperature(client, owner):
    run = stored_run(owner, [call("plan", 0.8, None, "refused", NOTE), call("code", 0.1, 0.1)])
    client.force_login(owner)
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    notice = page.split('id="temperature-notice"', 1)[1].split("</div>\n", 1)[0]
    assert "hidden" not in notice.split(">", 1)[0]
    assert "plan ran without its temperature 0.8: m-notemp rejects temperature" in notice
    assert "(1 call: #1)" in notice and "code ran" not in notice
    tab = client.get(reverse("pages:node", args=[run.pk, 1])).content.decode()
    assert 'id="node-temperature-notice"' in tab
    rows = tab.split('id="agent-calls"', 1)[1].split("</table>", 1)[0]
    plan_row, code_row = rows.split("<tr", 3)[2:4]
    assert "0.8" in plan_row and "not sent" in plan_row and "temperature-dropped" in plan_row
    assert "0.1</td>" in code_row and "not sent" not in code_row
    assert "re-sent without it" in rows


def test_nothing_is_said_when_every_role_had_its_temperature(client, owner):
    run = stored_run(owner, [call("plan", 0.8, 0.8), call("code", 0.1, 0.1)])
    client.force_login(owner)
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert 'id="temperature-notice" role="status" hidden' in page and "ran without its temperature" not in page
    tab = client.get(reverse("pages:node", args=[run.pk, 1])).content.decode()
    assert 'id="node-temperature-notice"' not in tab and "not sent" not in tab


def test_the_form_sends_strict_temperatures_for_an_llm_team_only():
    base = {"problem_source": RELU, "device": "cpu", "budget": 2, "parallel": 1}
    form = NewRunForm(data={**base, "team": "stark", "strict_temperatures": "on"})
    assert form.is_valid(), form.errors
    assert form.run_data()["strict_temperatures"] is True
    unticked = NewRunForm(data={**base, "team": "stark"})
    assert unticked.is_valid() and "strict_temperatures" not in unticked.run_data()
    offline = NewRunForm(data={**base, "team": "rules", "strict_temperatures": "on"})
    assert offline.is_valid() and "strict_temperatures" not in offline.run_data()
