"""Nothing final before it is settled, in Debian's chromium: when the search's last attempt is in, the run is
`settling` (page, API, websocket) while its contenders are re-timed side by side; its header says what is pending,
never a figure, and once the last re-time lands the run is `finished` with the settled winner. No headline shown
after the search ended is ever withdrawn. A real daphne, a real websocket, real rows; the end of the search is the
service's own (steps.finish queues retime.at_end, which requests the re-times); the re-times' answers are stored the
way retime.record stores them."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection

from kernels.parent.problem import reference_candidate
from stark_web.studio.models import Node, Problem, Run, source_hash
from stark_web.studio.service import retime, steps
from stark_web.studio.service.runs import load_tree, locked_run
from tests.kernels.conftest import CLAMP, RELU
from tests.web.seed import EVAL, result, store_verdict
from tests.web.test_browser_flow import log_in
from tests.web.test_contender_winner import retimed
from tests.web.test_honest_numbers import watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

# Every change of the header, as [status, headline] pairs, from the moment the page is live.
WATCH = """() => {
  window.seen = [];
  const note = () => window.seen.push([document.querySelector('[data-fig=status]').textContent,
                                       document.querySelector('[data-fig=best]').textContent]);
  new MutationObserver(note).observe(document.getElementById('run-header'),
                                     {subtree: true, childList: true, characterData: true});
  note();
}"""


def steady(median: float) -> dict:
    out = result(median, [])
    out["timing"] = {**out["timing"], "iqr_ms": median * 0.02}
    return out


@pytest.fixture
def running(owner):
    """A running run whose two attempts are in (the search timed #2 fastest); nothing else to start."""
    problem, _ = Problem.objects.get_or_create(owner=owner, hash=source_hash(RELU),
                                               defaults={"name": "relu", "source": RELU})
    run = Run.objects.create(owner=owner, problem=problem, name="settling", team="rules", status="running",
                             budget=2, settings={"eval": EVAL, "budget": 2}, stop_reason="")
    now = time.time()
    common = {"run": run, "created_at": now - 60, "finished_at": now - 30, "usage": {}, "status": "done",
              "verdict": "pass"}
    Node.objects.create(node_id=0, parent=None, attempt=0, role="root", source=reference_candidate(RELU),
                        runtime_ms=40.1, result=steady(40.1), **common)
    Node.objects.create(node_id=1, parent=0, attempt=1, role="plan+code", source=CLAMP, runtime_ms=20.0,
                        result=steady(20.0), **common)
    Node.objects.create(node_id=2, parent=1, attempt=2, role="plan+code", source=CLAMP + "\n# a step\n",
                        runtime_ms=19.0, result=steady(19.0), **common)
    return store_verdict(run)


def off_loop(fn: Callable[[], Any]) -> Any:
    """Run database work in a thread of its own (Playwright's sync API keeps an event loop in this one)."""
    out: dict[str, Any] = {}

    def work() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(60)
    if "error" in out:
        raise out["error"]
    return out.get("value")


def finish_search(run_id: int) -> Run:
    with locked_run(run_id) as run:  # the search's end, as the schedule step ends it
        steps.finish(run, load_tree(run), Run.Status.FINISHED, "budget of 2 attempts spent")
    return Run.objects.get(pk=run_id)


def land(run: Run, node_id: int, answer: dict) -> None:
    """A re-time's answer stored as retime.record stores it (then the verdict and the settling step)."""
    with locked_run(run.pk) as locked:
        row = Node.objects.get(run=locked, node_id=node_id)
        retime.set_retime(locked.pk, row, {**answer, "job": row.result["retime"]["job"], "at": time.time()})
        retime.apply_verdict(locked)
        assert retime.settle_winner(locked) == []


def test_settling_between_the_last_attempt_and_the_settled_verdict(running, daphne_server, browser, redis_client,
                                                                    settings):
    settings.STARK_RETIME_AT_END = True  # the search's end (in this process) re-times its contenders
    base = daphne_server
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{running.pk}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.evaluate(WATCH)

    run = off_loop(lambda: finish_search(running.pk))
    assert run.status == "settling" and run.meta[retime.CONTENDERS]["nodes"] == [2, 1], run.meta
    page.wait_for_function("() => document.querySelector('[data-fig=status]').textContent === 'settling'")
    page.wait_for_function("() => document.querySelector('[data-fig=best]').textContent"
                           " === 'Settling: re-timing #2 (queued), #1 (queued)'")
    assert "re-timed side by side" in page.inner_text("[data-fig=spread]")
    api = page.request.get(f"{base}/api/runs/{run.pk}").json()["run"]
    assert api["status"] == "settling" and api["winner"] is None and api["contenders"] == [2, 1]
    assert "settling" in page.inner_text("#download-bundle")

    off_loop(lambda: land(run, 2, retimed(1.6, 1.58, 1.62)))  # the search's fastest, slower side by side
    page.wait_for_function("() => document.querySelector('[data-fig=best]').textContent"
                           " === 'Settling: re-timing #1 (queued)'")
    assert page.inner_text("[data-fig=status]") == "settling"
    off_loop(lambda: land(run, 1, retimed(1.9, 1.87, 1.93)))
    page.wait_for_function("() => document.querySelector('[data-fig=status]').textContent === 'finished'")
    page.wait_for_function("() => document.querySelector('[data-fig=best]').textContent === '1.90× (#1)'")
    run = off_loop(lambda: Run.objects.get(pk=running.pk))
    assert run.status == "finished" and run.best_node == 1 and run.winner == "attempt"

    seen = page.evaluate("() => window.seen")
    after_end = [best for status, best in seen if status in ("settling", "finished")]
    assert after_end and all(b.startswith("Settling: ") or b == "1.90× (#1)" for b in after_end), seen
    assert all(best == "1.90× (#1)" for status, best in seen if status == "finished"), seen  # never withdrawn
    rows = page.eval_on_selector_all("#leaderboard tbody tr[data-node]", "rs => rs.map(r => r.dataset.node)")
    assert rows == ["1", "2"], rows
    assert not errors, errors
