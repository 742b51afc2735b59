"""Bad input through the JSON API: lone surrogates in any text field, true/false where a number
is expected, and invalid UTF-8 in a JSON body are 400s naming the field; none is a 500 or silently accepted."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.service.helpers import CHEAP_EVAL, PROBLEM_PATH, problem_source

LONE = "\ud800"  # json.dumps writes it as the escape "\\ud800", which json.loads turns back into a lone surrogate


@pytest.fixture
def client(owner) -> Client:
    from stark_web.studio.tokens import create_token

    return Client(HTTP_AUTHORIZATION=f"Bearer {create_token(owner)}")


def post(client: Client, url: str, body: dict | bytes):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(url, raw, content_type="application/json")


def stored_run(owner, status: str = "finished"):
    """A run stored through the service's own path, without the problem check's child process."""
    from stark_web.studio.models import Run
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    problem = problem_for(owner, problem_source(), PROBLEM_PATH.name, summary={})
    run = create_run(owner, problem, parse_run_settings({"team": "scripted", "budget": 2, "eval": CHEAP_EVAL}))
    Run.objects.filter(pk=run.pk).update(status=status)
    return Run.objects.get(pk=run.pk)


def assert_400(response, field: str, words: str) -> None:
    assert response.status_code == 400, (response.status_code, response.content[:300])
    body = response.json()
    assert body["field"] == field, body
    assert words in body["message"], body


@pytest.mark.django_db
def test_lone_surrogates_are_400s_naming_the_field(client, owner, stranger):
    from stark_web.studio.models import Run

    assert_400(post(client, "/api/runs", {"team": "scripted", "problem_source": problem_source() + f"# {LONE}\n"}),
               "problem_source", "lone surrogate")
    assert_400(post(client, "/api/runs", {"team": "scripted", "name": LONE, "problem_source": problem_source()}),
               "name", "lone surrogate")
    assert_400(post(client, "/api/runs", {"team": "scripted", "team_options": {"model": f"m{LONE}"},
                                          "problem_source": problem_source()}), "team_options.model", "surrogate")
    run = stored_run(owner)
    assert_400(post(client, f"/api/runs/{run.pk}/share", {"username": f"eve{LONE}"}), "username", "lone surrogate")
    assert_400(post(client, f"/api/runs/{run.pk}/fork", {"node": 0, "name": LONE}), "name", "lone surrogate")
    assert_400(post(client, f"/api/runs/{run.pk}/share", {f"user{LONE}": "eve"}), "body", "has a key")
    assert Run.objects.count() == 1 and not run.shared_with.exists()


@pytest.mark.django_db
def test_booleans_are_not_numbers(client, owner):
    from stark_web.studio.models import Run

    run = stored_run(owner)
    assert_400(post(client, f"/api/runs/{run.pk}/extend", {"budget": True}), "budget", "not a whole number")
    again = Run.objects.get(pk=run.pk)
    assert (again.status, again.budget) == ("finished", 2)  # a finished run is not restarted by `true`
    assert_400(post(client, f"/api/runs/{run.pk}/fork", {"node": True}), "node", "not a whole number")
    assert_400(post(client, f"/api/runs/{run.pk}/retime", {"node": False}), "node", "not a whole number")
    source = problem_source()
    for field, body in [("budget", {"budget": True}), ("time_limit_s", {"time_limit_s": True}),
                        ("max_tokens", {"max_tokens": True}),
                        ("team_options.plan_temperature", {"team_options": {"plan_temperature": False}}),
                        ("team_options.n_root", {"team_options": {"n_root": True}}),
                        ("eval.timing_runs", {"eval": {"timing_runs": True}})]:
        assert_400(post(client, "/api/runs", {"team": "scripted", "problem_source": source, **body}), field,
                   "not a")
    assert Run.objects.count() == 1
    # numbers as decimal text (forms) still work
    assert post(client, f"/api/runs/{run.pk}/extend", {"budget": "1"}).status_code == 200


@pytest.mark.django_db
def test_invalid_utf8_in_a_json_body_is_a_400(client, owner):
    from stark_web.studio.models import Run

    body = b'{"team": "scripted", "name": "caf\xe9", "problem_source": ' + json.dumps(problem_source()).encode() + b"}"
    assert_400(post(client, "/api/runs", body), "body", "not valid UTF-8")
    run = stored_run(owner)
    assert_400(post(client, f"/api/runs/{run.pk}/share", b'{"username": "\xff\xfe"}'), "body", "not valid UTF-8")
    assert Run.objects.count() == 1
