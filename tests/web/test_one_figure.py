"""One verdict, in Debian's chromium against a real daphne and a real websocket: one node's speed-up reads
the same in the run header, the leaderboard, the tree, compare and the bundle's report; the other attempts keep
their own figures (marked "not re-timed"); the header counts attempts as the API does, declined nodes shown apart;
and a fork's bundle says what its kernel.py holds.

The run is the issue's CPU gallery case: the search timed #7 at 3.552 ms against a 36.552 ms reference (10.3x), the
side-by-side re-time measured it at 1.36x; #9, #4 and #1 were not re-timed. Every figure is computed by
search.engine.verdict on the run's tree and stored the way the service stores it (tests/web/seed.py store_verdict).
"""

from __future__ import annotations

import io
import json
import time
import zipfile

import pytest
from django.test import Client

from stark_web.studio.models import Node, Problem, Run, source_hash
from tests.kernels.conftest import CLAMP, RELU
from tests.web.seed import EVAL, result, store_verdict
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import watch_errors

pytestmark = pytest.mark.django_db(transaction=True)

REFERENCE_MS = 36.552
ATTEMPTS = {1: 35.9, 4: 26.6, 7: 3.552, 9: 19.7}  # the search's medians of the correct attempts


def side_by_side(speedup: float, low: float, high: float, candidate_ms: float) -> dict:
    """A done re-time as kernels.parent.retime answers it."""
    def summary(median: float) -> dict:
        return {"median_ms": median, "iqr_ms": median * 0.02, "min_ms": median * 0.98, "mean_ms": median, "runs": 18}

    return {"state": "done", "speedup": speedup, "spread": {"low": low, "high": high}, "unstable": False,
            "unstable_why": "", "reference": summary(candidate_ms * speedup), "candidate": summary(candidate_ms),
            "rounds": 6, "runs_per_round": 3, "at": time.time(), "job": "j7", "flags": [],
            "protocol": "reference and candidate alternately in one process, 6 rounds of 3 runs"}


def timed(median: float) -> dict:
    out = result(median, [])
    out["timing"]["iqr_ms"] = median * 0.04
    return out


def gallery_run(owner, name: str = "one figure") -> Run:
    """Budget 10, ended at 6 attempts ("nothing left to select") with 2 declined nodes besides."""
    problem, _ = Problem.objects.get_or_create(owner=owner, hash=source_hash(RELU),
                                               defaults={"name": "relu", "source": RELU})
    run = Run.objects.create(owner=owner, problem=problem, name=name, team="rules", status="finished", budget=10,
                             settings={"eval": EVAL}, stop_reason="nothing left to select")
    now = time.time()
    common = {"run": run, "created_at": now - 60, "finished_at": now - 30, "usage": {}}
    Node.objects.create(node_id=0, parent=None, attempt=0, role="root", status="done", verdict="pass",
                        source=RELU, runtime_ms=REFERENCE_MS, result=timed(REFERENCE_MS), **common)
    for node_id, ms in ATTEMPTS.items():
        res = timed(ms)
        if node_id == 7:
            res["retime"] = side_by_side(1.36, 1.30, 1.41, 26.9)
        Node.objects.create(node_id=node_id, parent=0, attempt=node_id, role="plan+code", status="done",
                            verdict="pass", source=CLAMP + f"\n# attempt {node_id}\n", runtime_ms=ms, result=res,
                            instructions=[f"Fused Triton move {node_id}"], **common)
    for node_id in (5, 8):
        Node.objects.create(node_id=node_id, parent=0, attempt=node_id, role="plan+code", status="failed",
                            verdict="build_error", source="", reasons=["the candidate failed to build"], **common)
    for node_id, parent in ((2, 1), (3, 4)):
        Node.objects.create(node_id=node_id, parent=parent, attempt=node_id, role="plan+code", status="failed",
                            verdict="declined", source="", reasons=[f"the team had nothing left to try from #{parent}"],
                            **common)
    return store_verdict(run)


@pytest.fixture
def gallery(owner):
    """Seeded before the browser starts (Playwright's event loop then owns the thread: no ORM calls after)."""
    run = gallery_run(owner)
    assert run.attempts == 6 and run.verdict["declined"] == 2 and run.verdict["winner"] == 7
    return run


@pytest.mark.browser
def test_one_node_reads_the_same_everywhere(gallery, daphne_server, browser):
    base, run = daphne_server, gallery
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    api = page.request.get(f"{base}/api/runs/{run.pk}").json()
    stored = next(n for n in api["nodes"] if n["id"] == 7)["speed"]
    assert stored["short"] == "1.36×" and stored["provenance"] == "retimed"

    page.goto(f"{base}/runs/{run.pk}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.wait_for_function("() => document.querySelector('#leaderboard tbody tr[data-node=\"7\"]')")
    # The header: #7's figure, and the attempts as the API counts them (the declined nodes are free).
    assert page.inner_text("[data-fig=best]") == "1.36× (#7)"
    assert stored["text"] in page.inner_text("[data-fig=spread]")
    assert page.inner_text("[data-fig=attempts]") == f"{api['run']['attempts']} / 10" == "6 / 10"
    note = page.inner_text("[data-fig=attempts_note]")
    assert "2 declined, not counted" in note and "stopped at 6 of 10: nothing left to select" in note, note
    # The leaderboard: the figure beside the runtime that gave it (side by side, not the search's 3.552 ms).
    row = page.locator("#leaderboard tbody tr[data-node='7']")
    assert row.locator("td[data-speed]").get_attribute("data-speed") == "1.36×"
    assert "26.900 ms" in row.inner_text() and "3.552" not in row.inner_text()
    # The tree: the same figure; #9 keeps its own (36.552 / 19.7), marked, never rescaled through #7's re-time.
    assert "1.36×" in page.text_content("#tn-7 text.label")
    assert "1.86× (not re-timed)" in page.text_content("#tn-9 text.label")
    nine = page.inner_text("#leaderboard tbody tr[data-node='9']")
    assert "1.86×" in nine and "not re-timed" in nine and "19.700 ms" in nine, nine
    assert page.locator("#leaderboard tbody tr[data-node='7'] .badge.win-class").count() == 1
    # A declined node is drawn and explained, and not counted.
    assert page.text_content("#tn-2 text.label") == "#2 declined, not counted"
    page.click("#tn-2 circle")
    page.wait_for_selector(".inspector[data-node='2'] #node-declined")
    assert "nothing left to try from #1" in page.inner_text("#node-reasons")
    # The inspector of #7: the same figure, its runtime in that protocol.
    page.click("#tn-7 circle")
    page.wait_for_selector(".inspector[data-node='7']")
    assert stored["text"] in page.inner_text("#node-speedup")

    # Compare: the same figure for #7, #9's own.
    page.goto(f"{base}/compare/?a={run.pk}:7&b={run.pk}:9")
    metrics = page.inner_text("#compare-metrics")
    assert stored["text"] in metrics and "1.86× vs reference" in metrics and "not re-timed" in metrics, metrics

    # The bundle's report: the same figure, and the leaderboard from the stored figures.
    bundle = page.request.get(f"{base}/api/runs/{run.pk}/bundle.zip")
    with zipfile.ZipFile(io.BytesIO(bundle.body())) as z:
        report = z.read("report.md").decode()
        board = json.loads(z.read("report.json"))["leaderboard"]
    assert f"| Speed-up vs the reference | {stored['text'].replace('×', 'x')}" in report, report
    assert "| 7 (this node) | 1.36x | 26.9 ms | side by side" in report, report
    assert "| 9 | 1.86x | 19.7 ms | by the search" in report and "not re-timed" in report
    # the verdict's order, as on the page: its best (#7, re-timed) first, then the others by figure
    assert [e["id"] for e in board] == [7, 9, 4, 1] and board[0]["short"] == "1.36×" and board[0]["rank"] == 1
    assert not errors, errors


def fork_of(run: Run, node_id: int) -> Run:
    """A finished fork of `run` from `node_id` (control.fork's shape: its root holds that node's source) in which
    no attempt beat its root."""
    source = Node.objects.get(run=run, node_id=node_id).source
    fork = Run.objects.create(owner=run.owner, problem=run.problem, name="fork", team="rules", status="finished",
                              budget=2, settings={"eval": EVAL}, forked_from_run=run, forked_from_node=node_id,
                              stop_reason="budget used")
    now = time.time()
    common = {"run": fork, "created_at": now - 60, "finished_at": now - 30, "usage": {}}
    Node.objects.create(node_id=0, parent=None, attempt=0, role="root", status="done", verdict="pass", source=source,
                        runtime_ms=26.9, result=timed(26.9), **common)
    Node.objects.create(node_id=1, parent=0, attempt=1, role="plan+code", status="done", verdict="pass",
                        source=source + "\n# slower\n", runtime_ms=40.0, result=timed(40.0), **common)
    return store_verdict(fork)


def test_a_forks_bundle_says_what_it_holds(owner):
    run = gallery_run(owner)
    fork = fork_of(run, 7)
    assert fork.winner == "reference"
    client = Client()
    client.force_login(owner)
    answer = client.get(f"/api/runs/{fork.pk}/bundle.zip")
    assert answer.status_code == 200
    with zipfile.ZipFile(io.BytesIO(answer.content)) as z:
        readme, kernel, report = (z.read(name).decode() for name in ("README.txt", "kernel.py", "report.md"))
    assert "# attempt 7" in kernel  # the forked node's ModelNew ...
    assert "reference itself" not in readme + kernel + report  # ... which is not the reference
    held = f"the ModelNew of run {run.pk}'s node 7: this fork's root"
    assert held in readme and held in kernel and held in report, readme
    assert f"a fork of run {run.pk}'s node 7" in readme and "against that root" in readme
    # A run started from the problem still ships the reference itself when nothing beat it.
    slow = fork_of(run, 7)
    Run.objects.filter(pk=slow.pk).update(forked_from_run=None, forked_from_node=None)
    with zipfile.ZipFile(io.BytesIO(client.get(f"/api/runs/{slow.pk}/bundle.zip").content)) as z:
        assert "the reference itself (ModelNew = Model)" in z.read("README.txt").decode()


def test_the_header_counts_attempts_as_the_api_does(owner):
    """The server-rendered header (the live one is checked in chromium above): declined nodes are not counted."""
    run = gallery_run(owner)
    client = Client()
    client.force_login(owner)
    attempts = client.get(f"/api/runs/{run.pk}").json()["run"]["attempts"]
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert attempts == 6 and f'data-fig="attempts">{attempts} / 10</b>' in html
    assert "2 declined, not counted · stopped at 6 of 10: nothing left to select" in html
    rows = client.get("/runs/").content.decode()
    assert "6 / 10" in rows
