"""Suites without workers: POST /api/suites from a zip checks every field before storing anything, fans
out one run per (problem, team) only as the owner's active-run limit allows (the advance step), the API's cells and
per-team metrics are bench_record/bench_metrics over the runs' trees, exports agree with them, and a
`python -m search bench` output imports as a suite with the same figures."""

from __future__ import annotations

import csv
import io
import json
import zipfile

import pytest
from django.test import Client

from stark_web.studio.models import Run
from stark_web.studio.suites import service
from stark_web.studio.suites.models import Suite, SuiteMember
from tests.service.helpers import CHEAP_EVAL, ROOT

EXAMPLES = ROOT / "examples" / "problems"

pytestmark = pytest.mark.django_db(transaction=True)
PROBLEMS = ("level1/relu.py", "level1/softmax.py", "level2/linear_gelu_scale.py")


def level_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for path in PROBLEMS:
            archive.writestr(f"kb/{path}", (EXAMPLES / path).read_text())
        archive.writestr("kb/level1/__init__.py", "")
    return buf.getvalue()


@pytest.fixture
def client(owner, redis_client):
    from stark_web.studio.tokens import create_token

    c = Client()
    c.defaults["HTTP_AUTHORIZATION"] = f"Bearer {create_token(owner)}"
    return c


def post(client, **fields):
    data = {"teams": json.dumps([{"label": "a", "team": "scripted", "team_options": {"script": "ok:0.5"}},
                                 {"label": "b", "team": "scripted", "team_options": {"script": "fail"}}]),
            "budget": 2, "eval": json.dumps(CHEAP_EVAL), **fields}
    if "zip" not in data and "set" not in data:
        data["zip"] = io.BytesIO(level_zip())
        data["zip"].name = "kb.zip"
    return client.post("/api/suites", data)


@pytest.mark.parametrize("fields, field", [
    ({"teams": ""}, "teams"),
    ({"teams": "rules,nope"}, "teams[1]"),
    ({"budget": 0}, "budget"),
    ({"set": "level9"}, "set"),
    ({"eval": json.dumps({"timing_runs": True})}, "eval.timing_runs"),
    ({"teams": json.dumps([{"team": "scripted"}, {"team": "scripted"}])}, "teams[1].label"),
])
def test_a_bad_field_is_a_400_naming_it_and_stores_nothing(client, fields, field):
    answer = post(client, **fields)
    assert answer.status_code == 400, answer.content
    assert answer.json()["field"] == field, answer.json()
    assert not Suite.objects.exists() and not Run.objects.exists()


def test_a_bad_zip_and_a_bad_problem_name_their_field(client):
    bad = io.BytesIO(b"not a zip")
    bad.name = "x.zip"
    assert post(client, zip=bad).json()["field"] == "zip"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("level1/broken.py", "import torch\n")
    buf.seek(0)
    buf.name = "b.zip"
    answer = post(client, zip=buf)
    assert answer.status_code == 400 and answer.json()["field"] == "problems[level1/broken]", answer.json()


def test_it_fans_out_within_the_active_run_limit(client, owner, settings):
    settings.STARK_MAX_ACTIVE_RUNS = 2
    answer = post(client)
    assert answer.status_code == 201, answer.content
    suite = Suite.objects.get(pk=answer.json()["id"])
    members = list(suite.members.order_by("position"))
    assert [(m.key, m.team) for m in members][:3] == [("level1/relu", "a"), ("level1/relu", "b"), ("level1/softmax", "a")]
    assert len(members) == 6 and suite.max_active == 2
    service.advance(suite.pk)  # what the queued advance job does
    service.advance(suite.pk)  # twice: nothing doubles
    assert Run.objects.filter(owner=owner).count() == 2
    started = [m.run for m in suite.members.order_by("position") if m.run]
    assert [r.team for r in started] == ["scripted", "scripted"]
    assert [r.team_options["script"] for r in started] == ["ok:0.5", "fail"]
    # A run of the owner ends: a slot frees and the next member starts.
    Run.objects.filter(pk=started[0].pk).update(status="finished")
    service.advance(suite.pk)
    assert Run.objects.filter(owner=owner).count() == 3
    body = client.get(f"/api/suites/{suite.pk}").json()
    assert body["suite"]["counts"] == {"members": 6, "ended": 1, "active": 2, "pending": 3}
    assert [c["status"] for c in body["cells"]][3:] == ["pending"] * 3
    assert set(body["metrics"]) == {"a", "b"}
    # As a whole: pause stops the active runs, cancel ends them and nothing else starts.
    assert client.post(f"/api/suites/{suite.pk}/pause").status_code == 200
    assert set(Run.objects.filter(owner=owner).values_list("status", flat=True)) == {"finished", "paused"}
    assert client.post(f"/api/suites/{suite.pk}/pause").status_code == 409
    assert client.post(f"/api/suites/{suite.pk}/cancel").status_code == 200
    service.advance(suite.pk)
    assert Run.objects.filter(owner=owner).count() == 3
    assert set(Run.objects.filter(owner=owner).values_list("status", flat=True)) == {"finished", "cancelled"}


def test_results_exports_and_a_bench_import_agree(client, owner):
    """A stored run's tree gives the cell's record (bench_record) and the team's metrics (bench_metrics); the
    exports carry the same numbers; the bench format written from it imports with identical figures."""
    from search.bench_metrics import markdown
    from search.bench_record import problem_record
    from search.engine.suite_metrics import summarize
    from stark_web.studio.service.runs import load_tree
    from tests.web.seed import seeded_run

    run = seeded_run(owner)
    suite = Suite.objects.create(owner=owner, name="s", teams=[{"label": "r", "team": "rules", "team_options": {}}],
                                 budget=run.budget, status=Suite.Status.FINISHED)
    SuiteMember.objects.create(suite=suite, position=0, key="level1/relu", level="level1", team="r", run=run,
                               problem=run.problem)
    body = client.get(f"/api/suites/{suite.pk}").json()
    from pathlib import Path

    expected = problem_record(Path("level1/relu.py"), load_tree(run), run.status, run.stop_reason, 0.0)
    record = body["cells"][0]["record"]
    assert record["speedup_vs_eager"] == expected["speedup_vs_eager"] and record["best"] == expected["best"]
    assert body["metrics"]["r"] == json.loads(json.dumps(summarize([record])))
    rows = list(csv.DictReader(io.StringIO(client.get(f"/api/suites/{suite.pk}/results.csv").content.decode())))
    assert float(rows[0]["speedup_vs_eager"]) == pytest.approx(record["speedup_vs_eager"])
    tables = list(csv.DictReader(io.StringIO(client.get(f"/api/suites/{suite.pk}/tables.csv").content.decode())))
    eager_all = next(t for t in tables if t["suite"] == "all" and t["vs"] == "eager" and t["scope"] == "any")
    assert float(eager_all["mean_speedup_solved"]) == pytest.approx(body["metrics"]["r"]["all"]["eager"]
                                                                     ["mean_speedup_solved"])
    report = client.get(f"/api/suites/{suite.pk}/report.md").content.decode()
    exported = client.get(f"/api/suites/{suite.pk}/results.json").json()["teams"]["r"]
    assert markdown({**exported, "team": "r"}).split("\n", 2)[2] in report
    trees = zipfile.ZipFile(io.BytesIO(client.get(f"/api/suites/{suite.pk}/trees.zip").content))
    assert trees.namelist() == ["r/level1__relu.json"]

    # The bench's own format (one team per file) and its --trees folder, imported: the same figures.
    bench = {"team": "rules", "budget": run.budget, "device": "cpu", "seed": 0, "settings": {}, "problems": [expected],
             "summary": summarize([expected]), "finished": True}
    files = {"results": io.BytesIO(json.dumps(bench).encode()), "trees": io.BytesIO(trees.read("r/level1__relu.json"))}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        archive.writestr("level1__relu.json", trees.read("r/level1__relu.json"))
    files["results"].name, files["trees"] = "results.json", io.BytesIO(buf.getvalue())
    files["trees"].name = "trees.zip"
    answer = client.post("/api/suites/import", files)
    assert answer.status_code == 201, answer.content
    imported = client.get(answer.json()["api_url"]).json()
    assert imported["suite"]["status"] == "imported"
    assert imported["metrics"]["rules"] == json.loads(json.dumps(bench["summary"]))
    cell = imported["cells"][0]
    assert cell["record"]["speedup_vs_eager"] == expected["speedup_vs_eager"]
    assert cell["run"] and client.get(f"/api/runs/{cell['run']}").json()["run"]["status"] == "finished"
    bad = io.BytesIO(b'{"x": 1}')
    bad.name = "r.json"
    assert client.post("/api/suites/import", {"results": bad}).json()["field"] == "results[r.json]"


def test_a_suite_says_how_many_gpu_workers_it_can_keep_busy(client, owner, settings):
    """Its runs at once (within the owner's limit) times each run's attempts in flight, against the gpu workers
    registered in Redis now."""
    from rq import Worker

    from stark_web.studio.service import queues

    settings.STARK_MAX_ACTIVE_RUNS = 2
    answer = post(client, max_active=5, parallel=3)
    assert answer.status_code == 201, answer.content
    suite_id = answer.json()["id"]
    workers = [Worker([queues.queue("gpu")], connection=queues.connection(), name=f"gpu-capacity-{k}")
               for k in range(8)]
    for worker in workers:
        worker.register_birth()
    try:
        capacity = client.get(f"/api/suites/{suite_id}").json()["suite"]["capacity"]
    finally:
        for worker in workers:
            worker.register_death()
    # 5 asked for, 2 allowed by the owner's limit, 3 attempts each: 6 in flight for 8 workers
    assert capacity == {"runs_at_once": 2, "parallel": 3, "attempts_in_flight": 6, "gpu_workers": 8}
    settings.STARK_MAX_ACTIVE_RUNS = 0
    assert client.get(f"/api/suites/{suite_id}").json()["suite"]["capacity"]["runs_at_once"] == 5
