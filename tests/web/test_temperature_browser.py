"""Temperatures a model refused, in Debian's chromium: a service run (real daphne, real RQ workers, the real OpenAI
SDK) against a stub model that refuses plan's 0.8 but takes code's 0.1. The run header says live that the plan role
ran without its temperature and why, the tree marks the attempt "no temp", and the node's Agent tab shows asked vs
sent per call with the note; after a reload the server-rendered header says the same."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.llm.kernel_responder import kernel_responder
from tests.llm.stub_server import StubLLMServer
from tests.service.helpers import make_run
from tests.web.conftest import WORKER_CLASS, screenshot
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

NOTICE = "plan ran without its temperature 0.8: m-notemp rejects temperature"


@pytest.fixture
def stub(monkeypatch) -> Iterator[StubLLMServer]:
    with StubLLMServer(kernel_responder, reject_temperature=lambda t: t > 0.5) as server:
        monkeypatch.setenv("STARK_LLM_BASE_URLS", f"{server.url}/v1")  # the operator's endpoint
        yield server


@pytest.fixture
def run(owner, stub):
    """Created (and queued) before the browser starts: Playwright's event loop then owns the thread, no ORM after."""
    return make_run(owner, team="stark", budget=1, target="cpp", provider="openai-compatible",
                    base_url=f"{stub.url}/v1", model="m-notemp")


def test_the_header_tree_and_agent_tab_say_plan_ran_without_its_temperature(run, daphne_server, start_worker,
                                                                            browser):
    start_worker("search", *WORKER_CLASS)
    start_worker("gpu", *WORKER_CLASS)
    base = daphne_server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{run.pk}/")

    # Live: the notice appears from the node's call records, without a reload.
    page.wait_for_function(f"() => document.getElementById('temperature-notice').textContent.includes({NOTICE!r})",
                           timeout=400_000)
    assert page.is_visible("#temperature-notice")
    page.wait_for_function("() => ['finished', 'failed'].includes(window.stark.state.run.status)", timeout=400_000)
    assert page.evaluate("() => window.stark.state.run.status") == "finished"
    page.wait_for_selector("#tn-1", state="attached")
    assert "no temp" in page.get_attribute("#tn-1", "aria-label")
    assert "no temp" not in page.get_attribute("#tn-0", "aria-label")

    # The server-rendered header says the same after a reload; the agent tab shows asked vs sent per call.
    page.goto(f"{base}/runs/{run.pk}/#node-1")  # the same document: only the hash changes
    page.reload()  # so the server renders the page again, and the first snapshot opens node 1
    assert NOTICE in page.inner_text("#temperature-notice") and "#1" in page.inner_text("#temperature-notice")
    page.wait_for_selector(".inspector[data-node='1']")
    page.click("[role=tab][data-tab=agent]")
    assert page.is_visible("#node-temperature-notice")
    rows = page.locator("#agent-calls tr")
    texts = [rows.nth(i).inner_text() for i in range(rows.count())]
    plan_rows = [t for t in texts if t.startswith("plan")]
    code_rows = [t for t in texts if t.startswith("code")]
    assert plan_rows and all("0.8" in t and "not sent" in t for t in plan_rows)
    assert code_rows and all("not sent" not in t and "0.1" in t for t in code_rows)
    assert any("rejected temperature 0.8 for the plan agent" in t and "re-sent without it" in t for t in texts)
    screenshot(page, "temperature-notice")
    assert errors == []
