"""Never a slower winner, in Debian's chromium: a finished run whose contenders were re-timed side by side names its
best (run.best) and the run page's header shows that attempt, not the one the search timed fastest; the API and the
bundle agree. A real daphne, a real websocket, real rows (the re-time plan settled as
stark_web.studio.service.retime.settle_winner settles it; the figures and the verdict stored by search.engine.verdict,
tests/web/seed.py store_verdict)."""

from __future__ import annotations

import io
import time
import zipfile

import pytest

from stark_web.studio.models import Node
from stark_web.studio.service.retime import CONTENDERS
from tests.web.seed import result, seeded_run, store_verdict
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def retimed(speedup: float, low: float, high: float, reference_ms: float = 40.1) -> dict:
    """A done re-time as kernels.parent.retime answers it (timing summaries included)."""
    def summary(median: float) -> dict:
        return {"median_ms": median, "iqr_ms": median * 0.02, "min_ms": median * 0.98, "mean_ms": median, "runs": 18}

    return {"state": "done", "speedup": speedup, "spread": {"low": low, "high": high}, "unstable": False,
            "reference": summary(reference_ms), "candidate": summary(reference_ms / speedup),
            "reference_before": summary(reference_ms), "flags": [],
            "unstable_why": "", "rounds": 6, "runs_per_round": 3, "at": time.time(), "job": f"j{speedup}",
            "protocol": "reference and candidate alternately in one process, 6 rounds of 3 runs"}


@pytest.fixture
def settled(owner):
    """Seeded before the browser starts: the search timed #3 fastest (19 ms), side by side #1 was faster."""
    run = seeded_run(owner, best_ms=20.05, name="contenders settled", roofline_pct=None)
    node = Node.objects.get(run=run, node_id=1)
    node.result = {**node.result, "retime": retimed(1.9, 1.87, 1.93)}
    node.save()
    Node.objects.create(run=run, node_id=3, parent=1, attempt=3, role="plan+code", status="done", verdict="pass",
                        source=node.source + "\n# a step\n", runtime_ms=19.0, speedup_vs_eager=2.73,
                        result={**result(19.0, []), "retime": retimed(1.6, 1.58, 1.62)}, usage={},
                        created_at=time.time() - 20, finished_at=time.time() - 10)
    run.meta = {CONTENDERS: {"search_best": 3, "nodes": [3, 1], "winner": 1}}
    run.save()
    return store_verdict(run)


def test_the_page_names_the_contender_that_won_side_by_side(settled, daphne_server, browser):
    base = daphne_server
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{settled.pk}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.wait_for_function("() => document.querySelector('[data-fig=best]').textContent.includes('#')")
    assert page.inner_text("[data-fig=best]") == "1.90× (#1)", page.inner_text("[data-fig=best]")
    # The leaderboard ranks the stored figures (each attempt's own side-by-side one), not the search's runtimes:
    # #1 (1.90×) above #3 (1.60×, timed fastest by the search at 19 ms), and #1 marked the run's best.
    page.wait_for_function("() => document.querySelectorAll('#leaderboard tbody tr[data-node]').length === 2")
    rows = page.eval_on_selector_all("#leaderboard tbody tr[data-node]", "rs => rs.map(r => r.dataset.node)")
    assert rows == ["1", "3"], rows
    assert page.locator("#leaderboard tbody tr[data-node='1'] .badge.best").count() == 1
    assert "1.60×" in page.inner_text("#leaderboard tbody tr[data-node='3']")
    api = page.request.get(f"{base}/api/runs/{settled.pk}")
    assert api.ok and api.json()["run"]["best"] == 1 and api.json()["run"]["verdict"]["search_best"] == 3
    bundle = page.request.get(f"{base}/api/runs/{settled.pk}/bundle.zip")
    assert bundle.ok
    with zipfile.ZipFile(io.BytesIO(bundle.body())) as z:
        assert "node 1" in z.read("kernel.py").decode().splitlines()[0]
    assert not errors, errors
