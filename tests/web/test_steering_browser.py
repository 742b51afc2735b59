"""Steering a run, in Debian's chromium: a service run with plan review (real daphne, real RQ workers, the real OpenAI
SDK against the stand-in server). The plan waits in the page; the user edits its instruction and saves; the coded
attempt carries the edit (the code agent's prompt has it verbatim); a reload mid-run shows the same tree and the same
human events."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer
from tests.service.helpers import make_run
from tests.web.conftest import WORKER_CLASS, screenshot
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

EDITED = "fuse the residual subtract and the leaky ReLU into one pass (edited by ada)"
TREE = "() => JSON.stringify([...window.stark.state.nodes.values()].map(n => [n.id, n.parent, n.human]))"


@pytest.fixture
def stub(monkeypatch) -> Iterator[StubLLMServer]:
    with StubLLMServer(kernel_responder) as server:
        monkeypatch.setenv("STARK_LLM_BASE_URLS", f"{server.url}/v1")  # the operator's endpoint
        yield server


@pytest.fixture
def run(owner, stub):
    """Created (and queued) before the browser starts: Playwright's event loop then owns the thread, no ORM after."""
    return make_run(owner, team="stark", budget=2, target="cpp", provider="openai-compatible",
                    base_url=f"{stub.url}/v1", model="m", review_plans=True, review_timeout_s=3600)


def status_of(page, node: int) -> str:
    return page.evaluate(f"() => window.stark.state.nodes.get({node})?.status || ''")


def test_edit_a_waiting_plan_in_the_page_and_reload_mid_run(run, stub, daphne_server, start_worker, browser):
    start_worker("search", *WORKER_CLASS)
    start_worker("gpu", *WORKER_CLASS)
    base = daphne_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{run.pk}/")

    page.wait_for_function("() => window.stark.state.nodes.get(1)?.status === 'review'", timeout=300_000)
    page.evaluate("() => window.stark.openNode(1)")
    page.wait_for_selector("#review-form")
    assert not [r for r in stub.requests if "the CODE agent" in r.text]  # nothing is coded before the review
    page.fill("#review-instruction-1", EDITED)
    page.click("#review-save")
    page.wait_for_function(f"() => (window.stark.state.nodes.get(1)?.instructions || [])[0] === {EDITED!r}",
                           timeout=60_000)
    page.wait_for_function("() => ['done', 'failed'].includes(window.stark.state.nodes.get(1)?.status)",
                           timeout=300_000)
    assert any(f"INSTRUCTION 1: {EDITED}" in r.text for r in stub.requests if "the CODE agent" in r.text)

    # Mid-run (attempt 2's plan waits for review): a reload shows the same tree and the same human events.
    page.wait_for_function("() => window.stark.state.nodes.get(2)?.status === 'review'", timeout=300_000)
    before = page.evaluate(TREE)
    page.goto(f"{base}/runs/{run.pk}/#node-1")
    page.reload()
    page.wait_for_selector(".inspector[data-node='1']")
    assert page.evaluate(TREE) == before
    page.click("[role=tab][data-tab=agent]")
    events = page.inner_text("#human-events")
    assert "ada edited the plan" in events and EDITED in events and "STARK holds the plan for review" in events
    screenshot(page, "steering-review")

    page.evaluate("() => window.stark.openNode(2)")
    page.wait_for_selector(".inspector[data-node='2'] #review-reject")
    page.click("#review-reject")  # a rejected plan is free: the budget's second attempt is planned again
    page.wait_for_function("() => window.stark.state.nodes.get(2)?.verdict === 'plan_rejected'", timeout=60_000)
    page.wait_for_function("() => window.stark.state.nodes.get(3)?.status === 'review'", timeout=300_000)
    assert page.evaluate("() => window.stark.state.run.status") == "running"
    assert errors == []
