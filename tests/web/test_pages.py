"""The pages through Django's test client: access rules, the new-run flow, validation, inspector, compare."""

from __future__ import annotations

import pytest
from django.urls import reverse

from stark_web.studio.models import Node, Run
from stark_web.studio.service import control
from stark_web.studio.service.settings import parse_run_settings
from tests.web.seed import result, seeded_run, store_verdict

pytestmark = pytest.mark.django_db


def make_run(user, source: str) -> Run:
    problem = control.problem_for(user, source, "relu")
    return control.create_run(user, problem, parse_run_settings({"team": "rules", "budget": 3}))


def test_it_asks_anonymous_users_to_log_in(client):
    for url in ("/", "/runs/", "/runs/new/", "/compare/", "/runs/1/"):
        response = client.get(url)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/"), url


def test_it_renders_the_login_page(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b'name="username"' in response.content


def test_it_says_when_no_llm_key_is_set_and_offers_the_offline_team(client, owner, monkeypatch):
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "STARK_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    client.force_login(owner)
    html = client.get(reverse("pages:new")).content.decode()
    assert 'id="no-llm"' in html and "No LLM key is set" in html
    assert '<option value="rules" selected>' in html
    assert "ReLU" in html  # the gallery


def test_it_hides_the_notice_when_a_key_is_set(client, owner, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-real-0000")
    client.force_login(owner)
    html = client.get(reverse("pages:new")).content.decode()
    assert 'id="no-llm"' not in html
    assert "sk-test" not in html  # keys never reach the browser


@pytest.mark.slow
def test_it_validates_a_good_problem_with_its_shapes(client, owner, relu_source):
    client.force_login(owner)
    html = client.post(reverse("pages:validate"), {"problem_source": relu_source}).content.decode()
    assert 'id="problem-ok"' in html
    assert "float32[64, 65536]" in html
    assert "relu" in html.split("<dt>Ops</dt>", 1)[1]


@pytest.mark.slow
def test_it_shows_a_bad_problem_inline_and_queues_nothing(client, owner):
    client.force_login(owner)
    bad = "import torch\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    html = client.post(reverse("pages:validate"), {"problem_source": bad}).content.decode()
    assert 'id="problem-error"' in html and "get_inputs" in html
    response = client.post(reverse("pages:new"), {"problem_source": bad, "team": "rules", "device": "cpu",
                                                  "budget": 3, "parallel": 1})
    assert response.status_code == 400
    assert "get_inputs" in response.content.decode()
    assert not Run.objects.exists()


def test_it_fills_the_editor_from_the_gallery(client, owner, relu_source):
    client.force_login(owner)
    response = client.get(reverse("pages:example"), {"path": "level1/relu.py"})
    assert response.status_code == 200
    assert "torch.relu" in response.content.decode() or "relu" in response.content.decode()
    assert client.get(reverse("pages:example"), {"path": "../../etc/passwd"}).status_code == 404


@pytest.mark.slow
def test_it_starts_a_run_and_opens_its_page(client, owner, relu_source):
    client.force_login(owner)
    response = client.post(reverse("pages:new"), {"problem_source": relu_source, "problem_name": "relu.py",
                                                  "team": "rules", "device": "cpu", "budget": 4, "parallel": 1})
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.pk}/"
    assert (run.team, run.budget, run.problem.name) == ("rules", 4, "relu")
    page = client.get(response["Location"]).content.decode()
    assert f'"/ws/runs/{run.pk}/"' in page and 'id="tree"' in page
    assert reverse("pages:runs") in page
    assert f"#{run.pk}" in client.get(reverse("pages:runs")).content.decode()


@pytest.mark.slow
def test_the_active_run_limit_is_named_on_the_page(client, owner, relu_source, settings):
    settings.STARK_MAX_ACTIVE_RUNS = 1
    client.force_login(owner)
    form = {"problem_source": relu_source, "team": "rules", "device": "cpu", "budget": 2, "parallel": 1}
    assert client.post(reverse("pages:new"), form).status_code == 302
    refused = client.post(reverse("pages:new"), form)
    page = refused.content.decode()
    assert refused.status_code == 429 and "STARK_MAX_ACTIVE_RUNS" in page and "Cancel one" in page
    assert Run.objects.count() == 1


def test_it_names_a_bad_setting_next_to_its_field(client, owner, relu_source):
    client.force_login(owner)
    response = client.post(reverse("pages:new"), {"problem_source": relu_source, "team": "rules", "device": "cpu",
                                                  "target": "cuda", "budget": 3, "parallel": 1})
    assert response.status_code == 400
    assert "needs a CUDA device" in response.content.decode()


@pytest.mark.slow
def test_a_foreign_user_cannot_see_a_run(client, owner, stranger, relu_source):
    run = make_run(owner, relu_source)
    client.force_login(stranger)
    assert client.get(reverse("pages:run", args=[run.pk])).status_code == 404
    assert client.get(reverse("pages:node", args=[run.pk, 0])).status_code == 404
    assert client.get(reverse("pages:compare"), {"a": f"{run.pk}:0", "b": f"{run.pk}:0"}).status_code == 404
    assert f"#{run.pk}" not in client.get(reverse("pages:runs")).content.decode()
    run.shared_with.add(stranger)
    assert client.get(reverse("pages:run", args=[run.pk])).status_code == 200


@pytest.mark.slow
def test_the_inspector_marks_anchors_and_filled_lines(client, owner, relu_source):
    run = make_run(owner, relu_source)
    root = Node.objects.get(run=run, node_id=0)
    skeleton = (root.source + "\n# <<<IMPROVE BEGINS>>> fuse the relu into one pass\n"
                "y = 1\n# <<<IMPROVE ENDS>>>\n")
    filled = root.source + "\ny = 2\nz = 3\n"
    Node.objects.filter(pk=root.pk).update(status="done", verdict="pass", runtime_ms=2.0)  # the reference: 2 ms
    Node.objects.create(run=run, node_id=1, parent=0, attempt=1, role="plan+code", status="done", verdict="pass",
                        anchored_source=skeleton, source=filled, instructions=["fuse the relu into one pass"],
                        runtime_ms=1.0, speedup_vs_eager=2.0, created_at=0.0)
    store_verdict(run)  # the figures the engine stores (search.engine.verdict)
    client.force_login(owner)
    html = client.get(reverse("pages:node", args=[run.pk, 1])).content.decode()
    assert "fuse the relu into one pass" in html
    assert 'id="skeleton-code"' in html and "anchor-marker" in html
    assert 'id="filled-code"' in html and "filled" in html
    assert "+ y = 2" in html  # the diff against the root
    compare = client.get(reverse("pages:compare"), {"a": f"{run.pk}:0", "b": f"{run.pk}:1"}).content.decode()
    # speed-ups are against the reference timed the same way (2 ms / 1 ms), never a separately timed eager
    assert 'id="compare-metrics"' in compare and "2.00× vs reference" in compare and "z = 3" in compare
    assert "1.00× (the reference)" in compare


@pytest.mark.slow
def test_it_passes_the_evaluation_settings_to_the_run(client, owner, relu_source):
    client.force_login(owner)
    client.post(reverse("pages:new"), {"problem_source": relu_source, "team": "rules", "device": "cpu", "budget": 2,
                                       "parallel": 1, "eval_present": "1", "eval_correctness_trials": 7,
                                       "eval_timing_runs": 20, "eval_warmup_runs": 2, "eval_baselines": ["eager"],
                                       "eval_fuzz": "off"})
    ev = Run.objects.get().settings["eval"]
    assert (ev["correctness_trials"], ev["timing_runs"], ev["warmup_runs"], ev["fuzz"]) == (7, 20, 2, "off")
    assert ev["baselines"] == ["eager"] and ev["roofline"] is False  # the unticked box


def test_a_re_time_moves_only_its_own_figure(client, owner):
    """Once an attempt was re-timed beside the reference, that figure is its own (the side-by-side ratio); every other
    attempt keeps its own figure (the search's, marked "not re-timed"), never rescaled through the re-timed one."""
    run = seeded_run(owner)  # reference 40.1 ms, #1 20.05 ms
    best = Node.objects.get(run=run, node_id=1)
    best.result = {**best.result, "roofline": None,
                   "retime": {"state": "done", "speedup": 4.0, "spread": {"low": 3.5, "high": 4.5},
                              "unstable": False, "unstable_why": "", "at": 1.0,
                              "protocol": "reference and candidate alternately in one process",
                              "reference": {"median_ms": 8.0}, "candidate": {"median_ms": 2.0}}}
    best.save()
    other = Node.objects.get(run=run, node_id=2)
    other.verdict, other.status, other.runtime_ms, other.source = "pass", "done", 40.1, best.source
    other.result = {**best.result, "retime": None, "flags": [], "timing": result(40.1, [])["timing"]}
    other.save()
    store_verdict(run)
    client.force_login(owner)
    compare = client.get(reverse("pages:compare"), {"a": f"{run.pk}:1", "b": f"{run.pk}:2"}).content.decode()
    assert "4.00× vs reference (3.50–4.50×)" in compare  # the re-time itself
    assert "2.000 ms side by side with the reference" in compare  # its runtime in that protocol, not 20.05 ms
    # #2 keeps the search's own figure (40.1 ms / 40.1 ms), not 4.0 × 20.05 / 40.1 = 2.00× through #1's re-time
    assert "1.00× vs reference (0.67–1.50×) · not re-timed" in compare and "2.00×" not in compare
    assert 'class="badge flag not-retimed"' in compare
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "4.00× (#1)" in page
    assert "4.00×" in client.get(reverse("pages:runs")).content.decode()


@pytest.mark.slow  # creating the run checks its problem in a child process
def test_missing_and_foreign_pages_are_styled_404s(client, owner, stranger, relu_source):
    run = make_run(owner, relu_source)
    client.force_login(stranger)
    for url in (reverse("pages:run", args=[run.pk]), "/runs/99999/", "/no/such/page/"):
        response = client.get(url)
        html = response.content.decode()
        assert response.status_code == 404 and 'id="error-page"' in html and 'class="topnav"' in html, url
    assert f"no run {run.pk} that you can see" in client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "Resolver404" not in client.get("/no/such/page/").content.decode()


def test_a_figure_too_wide_to_measure_reads_none_faster_in_the_runs_list_as_on_the_run_page(client, owner):
    """A side-by-side re-time whose range is wider than the witness allows (0.69-1.51x) is not measurable: the run's
    verdict keeps the reference, and the runs list and the run header say so instead of printing 1.24x."""
    run = seeded_run(owner, best_ms=30.0, roofline_pct=None)
    node = Node.objects.get(run=run, node_id=1)
    node.result = {**node.result, "retime": {
        "state": "done", "speedup": 1.24, "spread": {"low": 0.69, "high": 1.51}, "unstable": True,
        "unstable_why": "the rounds disagree", "rounds": 4, "runs_per_round": 3, "flags": ["timing_unstable"],
        "reference": {"median_ms": 37.2, "iqr_ms": 9.0, "min_ms": 25.0, "mean_ms": 37.2, "runs": 12},
        "candidate": {"median_ms": 30.0, "iqr_ms": 8.0, "min_ms": 22.0, "mean_ms": 30.0, "runs": 12},
        "protocol": "reference and candidate alternately in one process"}}
    node.save()
    run = store_verdict(run)
    assert run.verdict["kind"] == "reference" and run.verdict["best_speed"]["value"] > 1.0, run.verdict
    client.force_login(owner)
    row = client.get(reverse("pages:runs")).content.decode().split(f'data-run="{run.pk}"', 1)[1].split("</tr>", 1)[0]
    assert "none faster" in row and "1.24×</td>" not in row, row
    page = client.get(reverse("pages:run", args=[run.pk])).content.decode()
    assert "The reference is fastest" in page
