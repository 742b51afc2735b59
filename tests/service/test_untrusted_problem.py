"""An uploaded problem is untrusted code: with the offline rules team it is traced only in an isolated harness child,
never in the search worker (which holds Django, the database, Redis and the LLM keys). Real workers, the real API,
non-staff users.

The problems here carry payloads that act only where Django is loaded (the attack of issue #13, V1): had any server
process imported the problem, bob would be a superuser and the marker files would exist. The runs still trace the
problem (its first attempt fuses its kernels), so the payload did run, in the child. A problem that hangs at import
ends its run at the analysis deadline (V5) and the next run goes on."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from django.test import Client

from tests.service.conftest import Workers
from tests.service.helpers import CHEAP_EVAL, problem_source, run_finished, wait_for
from tests.teams.processes import running_with

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ANALYSIS_TIMEOUT_S = 20


def api(user) -> Client:  # noqa: ANN001
    from stark_web.studio.tokens import create_token

    client = Client(enforce_csrf_checks=True)
    client.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(user)}"
    return client


def post_run(user, source: str, team: str = "rules", **fields: str) -> int:  # noqa: ANN001
    data = {"team": team, "budget": "1", "eval": json.dumps(CHEAP_EVAL), "problem_source": source, **fields}
    response = api(user).post("/api/runs", data)
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


@pytest.fixture
def rules_workers(start_worker, redis_client, bubblewrap) -> Workers:
    """A search worker (with the scheduler) whose rules-team analysis deadline is short, and a gpu worker; they and
    the problem checks run their children in bubblewrap where it works, as a server does by default."""
    w = Workers(start_worker)
    w.start("search", "--with-scheduler", STARK_RULES_ANALYSIS_TIMEOUT_S=str(ANALYSIS_TIMEOUT_S))
    w.start("gpu")
    return w


def escalating_problem(markers: Path) -> str:
    """The problem with a payload that escalates bob and leaves a marker where Django is set up (a server
    process), and another marker where it can import the service's models. It never breaks the problem itself."""
    return problem_source() + f'''

# --- the attack: act only inside a server process -----------------------------------------------------------
import os as _os
import sys as _sys


def _django_ready():
    conf = _sys.modules.get("django.conf")
    try:
        return conf is not None and conf.settings.configured
    except Exception:
        return False


if _django_ready():
    try:
        open({str(markers / "django-loaded")!r}, "w").write(str(_os.getpid()) + " " + repr(_sys.argv))
        from django.contrib.auth import get_user_model

        get_user_model().objects.filter(username="bob").update(is_staff=True, is_superuser=True)
    except Exception:
        pass
try:
    import stark_web.studio.models  # noqa: F401
except Exception:
    pass
else:
    try:
        open({str(markers / "search-models-imported")!r}, "w").write(str(_os.getpid()))
    except OSError:
        pass
'''


@pytest.mark.django_db(transaction=True)
def test_a_problem_that_escalates_its_owner_when_django_is_loaded_does_nothing(rules_workers, django_user_model,
                                                                               tmp_path):
    from search.teams.rules.planning.recipe import recipe_of
    from stark_web.studio.models import Node

    bob = django_user_model.objects.create_user("bob", password="pw-bob-123")
    assert not bob.is_staff and not bob.is_superuser
    run_id = post_run(bob, escalating_problem(tmp_path))
    run = wait_for(run_finished(run_id), 900, "the rules run to finish")
    bob.refresh_from_db()
    assert not bob.is_staff and not bob.is_superuser, "the problem's code ran with the server's database"
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "the problem's code ran in a server process"
    assert run.status == "finished", (run.status, run.error)
    first = Node.objects.get(run_id=run_id, node_id=1)
    recipe = recipe_of(first.source)
    # the problem was traced all the same (in the harness child): its forward was fused into kernels of our own
    assert recipe is not None and recipe.fused, (first.status, first.verdict, first.reasons, first.agent_log[-2000:])


SLEEPY = '''

import os as _os
import subprocess as _subprocess
import sys as _sys
import time as _time

if "search.teams.rules.traced" in _sys.modules:  # only when the rules team traces it (not in the upload check)
    if _os.fork() == 0:  # a daemon of its own: double fork + setsid
        _os.setsid()
        _subprocess.Popen(["sleep", "876.543"])
        _os._exit(0)
    print("sleeping at import", flush=True)
    _time.sleep(3600)
'''


@pytest.mark.django_db(transaction=True)
def test_a_problem_that_hangs_at_import_fails_at_the_deadline_and_the_next_run_goes_on(rules_workers, owner,
                                                                                         stranger):
    from stark_web.studio.models import Run

    started = time.monotonic()
    sleepy = post_run(stranger, problem_source() + SLEEPY)
    other = post_run(owner, problem_source(), team="scripted")
    run = wait_for(run_finished(sleepy), 600, "the hanging rules run to end")
    ended_after = time.monotonic() - started
    assert run.status == Run.Status.FAILED, (run.status, run.error)
    assert f"the problem did not finish importing within {ANALYSIS_TIMEOUT_S} s" in run.error, run.error
    assert "sleeping at import" in run.error  # the problem's own output, quoted
    attempt = run.nodes.get(node_id=1)
    assert attempt.verdict == "agent_error" and "did not finish importing" in " ".join(attempt.reasons)
    # the root's evaluation, then one analysis child stopped at its deadline: far from the job's 1800 s timeout
    assert ended_after < 400, ended_after
    assert running_with("876.543") == [], "the problem's daemon outlived its analysis child"
    done = wait_for(run_finished(other), 600, "the other user's run to finish")
    assert (done.status, done.attempts) == ("finished", 1), (done.status, done.error)
