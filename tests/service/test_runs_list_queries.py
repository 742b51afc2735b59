"""`GET /api/runs?limit=500` answers in a constant number of queries (Run.to_dict reads the stored
verdict instead of 3 queries a run, which would be ~1,500 for 500 runs)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from stark_web.studio.models import Problem, Run, source_hash
from stark_web.studio.tokens import create_token
from tests.service.helpers import problem_source

pytestmark = pytest.mark.django_db


def add_runs(owner, problem: Problem, count: int) -> None:
    Run.objects.bulk_create([Run(owner=owner, problem=problem, name=f"r{k}", team="rules", status="finished",
                                 best_node=1, verdict={"kind": "attempt", "winner": 1}) for k in range(count)])


def listed(client: Client) -> tuple[int, list[dict]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/api/runs?limit=500")
    assert response.status_code == 200, response.content
    return len(queries), response.json()["runs"]


def test_the_runs_list_costs_the_same_queries_for_3_runs_and_for_60(owner) -> None:
    source = problem_source()
    problem = Problem.objects.create(owner=owner, hash=source_hash(source), name="p", source=source)
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    add_runs(owner, problem, 3)
    few, runs = listed(client)
    assert len(runs) == 3 and runs[0]["winner"] == "attempt" and runs[0]["verdict"]["winner"] == 1
    add_runs(owner, problem, 57)
    many, runs = listed(client)
    assert len(runs) == 60 and many == few, (few, many)
