"""`scripted` is the tests' team (tests/plugins/): the product's registry does not list it, so outside the tests the
API, the new-run form and the CLI refuse it; the tests register it in their process and in every child they start."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from search.teams import TEAM_MODULES, TEAM_NAMES
from tests.plugins import TEST_TEAMS, with_test_teams
from tests.service.helpers import CHEAP_EVAL, problem_source

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_TEAMS = {"rules", "stark", "sampling", "reflexion", "search-single", "ma-only"}


@pytest.fixture
def without_test_teams(monkeypatch):
    """The registry as the product ships it."""
    for name in TEST_TEAMS:
        monkeypatch.delitem(TEAM_MODULES, name)


def test_only_the_tests_add_scripted_and_every_product_team_lives_in_search_teams():
    assert "scripted" in TEAM_NAMES and TEAM_MODULES["scripted"] == "tests.plugins.scripted"
    product = {name: module for name, module in TEAM_MODULES.items() if name not in TEST_TEAMS}
    assert set(product) == PRODUCT_TEAMS
    assert all(module.startswith("search.teams.") for module in product.values()), product


@pytest.mark.django_db
def test_the_api_refuses_scripted_outside_the_tests(owner, redis_client, without_test_teams):
    from stark_web.studio.models import Run
    from stark_web.studio.tokens import create_token

    client = Client(enforce_csrf_checks=True, HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")
    response = client.post("/api/runs", {"team": "scripted", "budget": "1", "eval": json.dumps(CHEAP_EVAL),
                                         "problem_source": problem_source()})
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == "team" and "unknown team 'scripted'" in body["error"] and "rules" in body["error"]
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_the_form_never_offers_scripted(owner, redis_client):
    from stark_web.studio.models import Run

    client = Client()
    client.force_login(owner)
    page = client.get(reverse("pages:new")).content.decode()
    assert 'value="rules"' in page and 'value="scripted"' not in page
    response = client.post(reverse("pages:new"), {"problem_source": problem_source(), "team": "scripted",
                                                  "device": "cpu", "budget": 1, "parallel": 1})
    assert response.status_code == 400 and "scripted is not one of the available choices" in response.content.decode()
    assert Run.objects.count() == 0


@pytest.mark.slow
def test_a_plain_interpreter_and_the_cli_know_no_scripted_team_and_the_launcher_adds_it():
    names = "import search.teams as t; print(','.join(t.TEAM_NAMES))"
    plain = subprocess.run([sys.executable, "-c", names], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0 and set(plain.stdout.strip().split(",")) == PRODUCT_TEAMS, plain.stderr
    cli = subprocess.run([sys.executable, "-m", "search", "run", "problem.py", "--team", "scripted"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 2 and "invalid choice: 'scripted'" in cli.stderr, cli.stderr
    launched = subprocess.run(with_test_teams([sys.executable, "-c", names]), cwd=ROOT, capture_output=True,
                              text=True, timeout=120)
    assert launched.returncode == 0 and "scripted" in launched.stdout.strip().split(","), launched.stderr
