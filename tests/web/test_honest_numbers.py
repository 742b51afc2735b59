"""Honest numbers, in Debian's chromium against a real daphne, real RQ workers and real harness children: one speed-up
timed one way (vs the reference, never a separately timed eager), "unstable" badges wherever a flagged number
shows, a re-time that updates the numbers live (the stored figure and the run's verdict), roofline over
100% as a warning, "No faster kernel found yet", downloads refused for nodes without source, and the reference's
phases while it is evaluated."""

from __future__ import annotations

import re
import time
import uuid

import pytest

from tests.web.conftest import SCREENSHOTS, WORKER_CLASS
from tests.web.seed import RELU, seeded_run
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
ISSUE = "issue18"


def shot(page, name: str) -> None:
    path = SCREENSHOTS.parent / ISSUE
    path.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(path / f"{name}.png"), full_page=True)


def watch_errors(page, errors: list[str], expected: tuple[int, ...] = ()) -> None:
    """Collect uncaught errors and console errors; `expected`: statuses the test provokes on purpose (chromium logs
    "Failed to load resource: ... status of 404" for them)."""
    allowed = tuple(f"status of {code} " for code in expected)

    def console(m) -> None:
        if m.type == "error" and not (m.text.startswith("Failed to load resource") and any(a in m.text for a in allowed)):
            errors.append(f"{page.url}: {m.text}")

    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    page.on("console", console)


@pytest.fixture
def runs(owner):
    """Seeded before the browser starts (Playwright's event loop then owns the thread: no ORM calls after)."""
    return seeded_run(owner), seeded_run(owner, best_ms=81.8, name="slower winner")


def test_the_run_page_shows_one_honest_number_and_re_times_it(runs, daphne_server, start_worker, browser):
    base = daphne_server
    run, slow = runs
    start_worker("search", *WORKER_CLASS)
    start_worker("gpu", *WORKER_CLASS)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")

    page.goto(f"{base}/runs/{run.pk}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.wait_for_function("() => document.querySelector('[data-fig=best]').textContent.includes('#1')")
    best = page.inner_text("#fig-best")
    assert "2.00×" in best and "24.38" not in best  # 40.1 ms / 20.05 ms, both timed as candidates
    assert page.is_visible("[data-fig=unstable]")  # the header's flagged number carries the badge
    assert "reference" in page.inner_text("[data-fig=spread]")
    assert page.locator("#leaderboard tbody tr[data-node='1'] .badge.unstable").count() == 1
    assert "2.00×" in page.inner_text("#leaderboard tbody tr[data-node='1']")
    roofline = page.locator("[data-fig=roofline]")
    assert "exceeds the measured ceiling" in roofline.inner_text() and "warn" in roofline.get_attribute("class")
    # The reference is the reference: no "1.29× vs eager" against a separately timed eager anywhere.
    assert "1.29" not in page.inner_text("body")
    labels = page.evaluate("() => [...document.querySelectorAll('#tree g.node')].map(g => g.getAttribute('aria-label'))")
    assert any("fused Triton" in label.replace("Fused", "fused") and "~2.00×" in label for label in labels), labels
    assert any("debug: fix shape" in label for label in labels), labels
    shot(page, "01-header-unstable-roofline")

    # The winner's inspector: the speed-up, its badge, the roofline explained, the move.
    page.click("#tn-1 circle")
    page.wait_for_selector(".inspector[data-node='1']")
    assert "2.00× vs reference" in page.inner_text("#node-speedup")
    assert page.locator("#node-speedup .badge.flag").count() == 1
    page.click("[role=tab][data-tab=timing]")
    assert page.locator("#node-roofline .gauge.over").count() == 1
    explained = page.inner_text("#node-roofline")
    assert "memory-bound ceiling" in explained and "3×" in explained and "FLOPs are not counted" in explained
    assert "not measured (the compile-max-autotune baseline was not asked for)" in page.inner_text(".inspector")
    shot(page, "02-inspector-roofline")

    # Downloads refused for a node with no source.
    assert page.request.get(f"{base}/api/runs/{run.pk}/bundle.zip?node=2").status == 409
    assert page.request.get(f"{base}/api/runs/{run.pk}/nodes/2/kernel.py").status == 409

    # Re-time the best against the reference in one harness child: the numbers change live, without a reload.
    page.evaluate("() => { window.__sameDocument = true; }")
    page.click("#retime-run")
    page.wait_for_function("() => (window.stark.state.nodes.get(1).result.retime || {}).state === 'queued'",
                           timeout=10_000)
    page.wait_for_function("() => document.querySelector('#retime-run').disabled"
                           " || window.stark.state.nodes.get(1).result.retime.state === 'done'")  # no double click
    page.wait_for_function("() => (window.stark.state.nodes.get(1).result.retime || {}).state === 'done'",
                           timeout=240_000)
    retime = page.evaluate("() => window.stark.state.nodes.get(1).result.retime")
    assert retime["rounds"] >= 2 and retime["speedup"] > 0, retime
    # The stored figure and the run's verdict, recomputed by the server, reach the page live.
    page.wait_for_function("() => (window.stark.state.nodes.get(1).speed || {}).provenance === 'retimed'"
                           " && ((window.stark.state.run.verdict || {}).best_speed || {}).provenance === 'retimed'")
    verdict = page.request.get(f"{base}/api/runs/{run.pk}").json()["run"]["verdict"]
    figure = verdict["best_speed"]
    value = retime["speedup"]
    assert figure["short"] == f"{value:.2f}×", (figure, retime)
    expected = {"untrusted": "No trustworthy winner", "reference": "The reference is fastest: no attempt beat it",
                "attempt": f"{figure['short']} (#1)"}[verdict["kind"]]
    page.wait_for_function("(text) => document.querySelector('[data-fig=best]').textContent === text", arg=expected)
    assert figure["short"] in page.inner_text("#leaderboard tbody tr[data-node='1']")
    assert page.evaluate("() => window.__sameDocument") is True
    page.wait_for_selector(".inspector[data-node='1'] #node-retime[data-state=done]", timeout=10_000)
    assert "Re-timed side by side" in page.inner_text("#node-retime")
    shot(page, "03-re-timed")

    # The reference re-timed against itself shows the noise floor; a stranger cannot re-time.
    assert page.request.post(f"{base}/api/runs/{run.pk}/retime", data={"node": 2},
                             headers={"X-CSRFToken": csrf(page)}).status == 409

    # A winner slower than the reference is not called a winner: in a finished run the reference is.
    page.goto(f"{base}/runs/{slow.pk}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.wait_for_function("() => document.querySelector('#download-bundle').textContent.includes('no attempt')")
    assert page.inner_text("[data-fig=best]") == "The reference is fastest: no attempt beat it"
    assert "0.49×" in page.inner_text("[data-fig=spread]")
    assert "Download the reference — no attempt beat it" in page.inner_text("#download-bundle")
    assert "slower" in page.get_attribute("#leaderboard tbody tr[data-node='1'] td:nth-child(3)", "class")
    shot(page, "04-no-faster-kernel")
    import io
    import zipfile

    bundle = page.request.get(f"{base}/api/runs/{slow.pk}/bundle.zip")  # the winner: the reference itself
    assert bundle.status == 200
    with zipfile.ZipFile(io.BytesIO(bundle.body())) as z:
        assert "the reference is fastest: no attempt beat it" in z.read("README.txt").decode()
        assert "class ModelNew(Model):" in z.read("kernel.py").decode()
    bundle = page.request.get(f"{base}/api/runs/{slow.pk}/bundle.zip?node=1")  # the slower attempt, on request
    with zipfile.ZipFile(io.BytesIO(bundle.body())) as z:
        assert "SLOWER than the reference" in z.read("README.txt").decode()
        report = z.read("report.md").decode()
    assert "SLOWER than the reference" in report and not re.search(r"\d\.\d{6,}", report)  # no raw floats

    # The runs list: the same verdict as the run page and its badge. The re-timed run shows the re-time's verdict
    # (on this CPU the seeded 2.00x may well re-time as no faster, or still beyond its roofline); the slower run,
    # never re-timed, keeps its seeded unstable timing and says so.
    page.goto(f"{base}/runs/")
    row = page.inner_text(f"#runs-table tr[data-run='{run.pk}']")
    assert "24.38" not in row, row
    assert {"untrusted": "no trustworthy winner", "reference": "none faster",
            "attempt": figure["short"]}[verdict["kind"]] in row, (row, verdict)
    assert ("unstable" in row) == bool(figure["unstable"]), (row, figure)
    slow_row = page.inner_text(f"#runs-table tr[data-run='{slow.pk}']")
    assert "none faster" in slow_row and "unstable" in slow_row, slow_row
    shot(page, "05-runs-list")
    assert errors == [], errors
    context.close()


def csrf(page) -> str:
    return next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")


SLOW_IMPORT_FREE = RELU.replace("        return torch.relu(x)", "        import time\n        time.sleep(0.25)\n"
                                "        return torch.relu(x)")


@pytest.fixture
def evaluating(owner):
    """A running run whose root is being evaluated by the job (run, job id); the job is enqueued by the test."""
    from stark_web.studio.models import Node
    from stark_web.studio.service import queues

    run = seeded_run(owner, name="evaluating")
    run.status = "running"
    run.best_node = None
    run.save()
    Node.objects.filter(run=run).exclude(node_id=0).delete()
    job_id = queues.make_job_id("eval", uuid.uuid4().hex[:8], 1)
    Node.objects.filter(run=run, node_id=0).update(status="building", verdict=None, runtime_ms=None, result=None,
                                                   phase="evaluate", job_id=job_id)
    return run, job_id


def test_phases_show_while_the_reference_is_evaluated(evaluating, daphne_server, start_worker, browser):
    """A real evaluation of the root on the gpu queue: the page shows its phase and elapsed time, and counts it
    in flight, from the job's meta (kernels.parent.jobs.publish_phase) through the socket's node.phase messages."""
    from stark_web.studio.service import queues

    base = daphne_server
    run, job_id = evaluating
    start_worker("gpu", *WORKER_CLASS)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{run.pk}/#node-0")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    assert page.inner_text("[data-fig=in_flight]") == "1"  # the reference is work in flight
    # Enqueued once the page is live, so it sees the phases of a short evaluation (the phases are the subject: no
    # fuzzing stage, no profile).
    queues.queue(queues.GPU_QUEUE).enqueue(
        queues.EVALUATE_JOB, SLOW_IMPORT_FREE, SLOW_IMPORT_FREE.rstrip() + "\n\n\nclass ModelNew(Model):\n    pass\n",
        {"timing_runs": 6, "warmup_runs": 1, "correctness_trials": 1, "baselines": ["eager"], "roofline": False,
         "reuse_results": False, "fuzz": "off", "profile": False},
        job_id=job_id, result_ttl=600)
    page.wait_for_function("() => /reference: .+ \\d+ s/.test(document.querySelector('[data-fig=phase]').textContent)",
                           timeout=90_000)
    assert re.search(r"reference: .+ \d+ s", page.inner_text("[data-fig=phase]"))
    page.wait_for_function("() => /Evaluating the reference: .+ s elapsed/.test("
                           "(document.querySelector('#node-phase') || {}).textContent || '')", timeout=30_000)
    assert re.search(r"reference: ", page.get_attribute("#tn-0", "aria-label") or "")
    shot(page, "06-reference-phases")
    deadline = time.monotonic() + 120
    while queues.fetch(job_id) and queues.fetch(job_id).get_status() not in ("finished", "failed"):
        if time.monotonic() > deadline:
            break
        time.sleep(1)
    assert errors == [], errors
    context.close()
