"""A rules run's inspector shows real spans. A rules run on the CPU through the real queues and workers
(the root may have one child, so the second attempt builds on the first: a ReLU applied twice, the first attempt drops
one, the second fuses the other); the second attempt's anchors view shows the lines of ModelNew's forward its move
changes, anchored, beside the filled code. Screenshots:
test-artifacts/issue16/rules-anchors-header.png and rules-anchors-model.png."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import pytest

from tests.service.helpers import CHEAP_EVAL
from tests.web.conftest import EXAMPLES, ROOT, WORKER_CLASS
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ISSUE16 = Path(os.environ.get("STARK_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "issue16"
# Scroll the code pane holding the k-th (negative: from the end) line matching a selector so that it shows.
SCROLL_TO = """([selector, k]) => {
  const lines = [...document.querySelectorAll(selector)];
  const line = lines[k < 0 ? lines.length + k : k];
  const pane = line.closest("pre");
  pane.scrollTop += line.getBoundingClientRect().top - pane.getBoundingClientRect().top - 60;
}"""
FORWARD_LINE = re.compile(r"self\._fused_forward|self\._compiled_forward|^\s+\w+ = (torch\.|self\.|fused\d)")


def planned(page, base: str, run_id: int, node_id: int, timeout: float = 600) -> dict:
    """The node once its plan is recorded (its anchored skeleton), from the JSON API."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = {n["id"]: n for n in page.request.get(f"{base}/api/runs/{run_id}").json()["nodes"]}
        node = nodes.get(node_id)
        if node and node.get("anchored_source") and node["status"] not in ("selected", "planning", "coding"):
            return node
        failed = [n for n in nodes.values() if n["status"] == "failed"]
        assert not failed, f"an attempt failed before node {node_id} was planned: {failed}"
        time.sleep(1)
    raise AssertionError(f"node {node_id} had no anchored skeleton within {timeout} s")


@pytest.fixture
def run_id(owner) -> int:
    """The rules run (budget 2, the root may have one child), stored and queued through the same path as the API,
    before the browser starts (Playwright's event loop then owns the thread: no ORM after). Cheap evaluations: the
    spans are this test's subject, not the timings or the fuzzing stage."""
    from stark_web.studio.service.control import create_run, problem_for
    from stark_web.studio.service.settings import parse_run_settings

    source = (EXAMPLES / "level1" / "relu.py").read_text()
    assert "dim = 65536" in source and "return torch.relu(x)" in source
    # A ReLU applied twice, so the first attempt is an exact rewrite in PyTorch (nothing to build: one ReLU dropped)
    # and the second fuses what is left into a C++ kernel; at 1/16 of the size (its outputs are judged in the worker).
    source = source.replace("dim = 65536", "dim = 4096").replace("return torch.relu(x)", "return torch.relu(torch.relu(x))")
    problem = problem_for(owner, source, "relu_twice.py")
    settings = parse_run_settings({"team": "rules", "budget": 2, "device": "cpu", "team_options": {"n_root": 1},
                                   "eval": CHEAP_EVAL})
    return create_run(owner, problem, settings).pk


def test_the_inspector_of_a_rules_run_shows_the_spans_a_move_rewrites(run_id, daphne_server, start_worker, browser):
    start_worker("search", *WORKER_CLASS)
    start_worker("gpu", *WORKER_CLASS)
    base = daphne_server
    page = browser.new_context(viewport={"width": 1600, "height": 1000}).new_page()
    log_in(page, base, "ada", "pw-ada-123")
    node = planned(page, base, run_id, 2)
    assert node["parent"] == 1 and node["role"] == "plan+code"

    page.goto(f"{base}/runs/{run_id}/")
    page.wait_for_selector("#tn-2 circle", timeout=60_000)
    page.click("#tn-2 circle")
    page.wait_for_selector(".inspector[data-node='2']")
    page.click("[role=tab][data-tab=anchors]")
    page.wait_for_selector("#skeleton-code .line.anchor-marker")
    anchored = page.locator("#skeleton-code .line.anchor").all_text_contents()
    markers = page.locator("#skeleton-code .line.anchor-marker").all_text_contents()
    # Real spans: the move's lines in ModelNew's forward, not one empty span above a rewritten file.
    assert any(FORWARD_LINE.search(line) for line in anchored), anchored
    assert any("apply it in ModelNew" in m for m in markers) and any("record the move in the header" in m
                                                                      for m in markers), markers
    skeleton_lines = page.locator("#skeleton-code .line").count()
    assert len(anchored) < skeleton_lines / 4  # most of the file is outside the spans
    filled = page.locator("#filled-code .line.filled").all_text_contents()
    assert filled and any("compile" in line or "fused" in line for line in filled), filled
    ISSUE16.mkdir(parents=True, exist_ok=True)
    for name, which in (("header", 0), ("model", -1)):  # each pane scrolled to the span of that part
        page.evaluate(SCROLL_TO, ["#skeleton-code .line.anchor-marker", 2 * which if which >= 0 else -2])
        page.evaluate(SCROLL_TO, ["#filled-code .line.filled", which])
        page.locator(".inspector").screenshot(path=str(ISSUE16 / f"rules-anchors-{name}.png"))
