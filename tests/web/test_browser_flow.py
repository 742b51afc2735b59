"""The whole UI in Debian's chromium against a real daphne and real RQ workers: log in, upload a problem,
start an offline-team run, watch nodes appear live, inspect anchors, compare, download and re-check the
winner, survive a reload and a dropped socket with the same tree, and keep foreign users out."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from tests.web.conftest import EXAMPLES, ROOT, SCREENSHOTS, WORKER_CLASS, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PROBLEM = EXAMPLES / "level2" / "residual_sub_leaky_relu_div.py"
TREE_JS = """() => [...window.stark.state.nodes.values()]
  .map(n => [n.id, n.parent, n.role, n.status, n.verdict, n.runtime_ms]).sort((a, b) => a[0] - b[0])"""
DOM_IDS = "() => [...document.querySelectorAll('#tree g.node')].map(g => Number(g.dataset.id)).sort((a, b) => a - b)"


def api_tree(page, base: str, run_id: int) -> tuple[int, list]:
    body = page.request.get(f"{base}/api/runs/{run_id}").json()
    nodes = sorted([n["id"], n["parent"], n["role"], n["status"], n["verdict"], n["runtime_ms"]] for n in body["nodes"])
    return body["seq"], nodes


def assert_same_tree_as_server(page, base: str, run_id: int, timeout: float = 60) -> list:
    """The page's tree equals the stored tree at the same seq (retried while the run moves on)."""
    deadline = time.monotonic() + timeout
    while True:
        seq, nodes = api_tree(page, base, run_id)
        if page.evaluate("() => window.stark.state.seq") == seq:
            shown = page.evaluate(TREE_JS)
            if shown == nodes and page.evaluate("() => window.stark.state.seq") == seq:
                assert page.evaluate(DOM_IDS) == [n[0] for n in nodes]
                return nodes
        if time.monotonic() > deadline:
            raise AssertionError(f"page tree {page.evaluate(TREE_JS)} (seq {page.evaluate('() => window.stark.state.seq')}) "
                                 f"never matched the server's {nodes} (seq {seq})")
        time.sleep(0.3)


def log_in(page, base: str, username: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(lambda url: "/accounts/login/" not in url)


def test_it_runs_the_whole_flow_in_a_browser(owner, stranger, daphne_server, start_worker, browser):
    started = time.monotonic()

    def lap(what: str) -> None:
        print(f"[{time.monotonic() - started:6.1f} s] {what}")

    start_worker("search", *WORKER_CLASS, STARK_RETIME_AT_END="1")  # the run ends with a side-by-side re-time
    start_worker("gpu", *WORKER_CLASS)
    base = daphne_server
    context = browser.new_context(viewport={"width": 1500, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    # A Content-Security-Policy violation (a blocked script, style or socket) is only a console message.
    page.on("console", lambda m: "Content Security Policy" in m.text and errors.append(m.text))

    page.goto(f"{base}/accounts/login/")
    screenshot(page, "01-login")
    log_in(page, base, "ada", "pw-ada-123")

    # Upload a problem: it is validated at once, nothing is queued yet.
    page.goto(f"{base}/runs/new/")
    page.set_input_files("#id_problem", str(PROBLEM))
    page.wait_for_selector("#problem-ok", timeout=120_000)
    assert "float32" in page.inner_text("#validation")
    page.select_option("#id_team", "rules")
    page.fill("#id_budget", "1")  # one attempt: the reference's first move (a fused C++ kernel) is the winner
    page.click("#eval-settings summary")
    page.fill("#id_eval_correctness_trials", "2")
    page.fill("#id_eval_timing_runs", "3")
    page.fill("#id_eval_warmup_runs", "1")
    page.uncheck("input[name=eval_baselines][value=compile]")
    page.uncheck("#id_eval_roofline")
    page.select_option("#id_eval_fuzz", "off")  # the fuzzing stage is not this flow's subject (tests/kernels)
    screenshot(page, "02-new-run")
    page.click("#start-run")
    page.wait_for_url(f"{base}/runs/*/")
    run_id = int(page.url.rstrip("/").rsplit("/", 1)[1])

    # Nodes appear live, without a reload.
    page.evaluate("() => { window.__sameDocument = true; }")
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length >= 2", timeout=240_000)
    assert page.evaluate("() => window.__sameDocument") is True
    lap("nodes appear live")
    # The agents' text streams in while they write (node.stream events).
    page.wait_for_function("() => window.stark.state.streams.size >= 1", timeout=120_000)
    screenshot(page, "03-run-live")

    # Reload mid-run: the same tree (snapshot + events), and a dropped socket shows "reconnecting".
    before = assert_same_tree_as_server(page, base, run_id)
    page.reload()
    page.wait_for_selector("#conn[data-state=live]", state="attached", timeout=60_000)
    after = assert_same_tree_as_server(page, base, run_id)
    assert [n[0] for n in after][:len(before)] == [n[0] for n in before]
    page.evaluate("() => window.stark.live.drop(2000)")
    page.wait_for_selector("#conn[data-state=reconnecting]", state="visible", timeout=5_000)
    assert "reconnecting" in page.inner_text("#conn")
    screenshot(page, "04-reconnecting")
    page.wait_for_selector("#conn[data-state=live]", state="attached", timeout=60_000)
    assert_same_tree_as_server(page, base, run_id)

    # Wait for the run to end and a correct attempt to win.
    page.wait_for_function("() => ['finished', 'failed', 'cancelled'].includes(window.stark.state.run.status)",
                           timeout=600_000)
    assert page.evaluate("() => window.stark.state.run.status") == "finished"
    best = page.evaluate("() => (window.stark.state.ranked()[0] || {}).id")
    assert best is not None, page.evaluate(TREE_JS)
    assert_same_tree_as_server(page, base, run_id)
    lap("run finished")
    # The run ends on one number timed one way: the best and the reference re-timed side by side, shown live.
    page.wait_for_function(f"() => ((window.stark.state.nodes.get({best}).result || {{}}).retime || {{}}).state === 'done'",
                           timeout=300_000)
    page.wait_for_function("() => document.querySelector('[data-fig=spread]').textContent.includes('alternately')")
    lap("best re-timed side by side")
    screenshot(page, "05-run-finished")

    # Keyboard: focus the tree, move to the first attempt, open it with Enter.
    page.focus("#tree")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    page.wait_for_selector(".inspector[data-node='1']")
    page.click("[role=tab][data-tab=agent]")
    assert page.text_content("#agent-stream").strip()

    # Click the winner: the anchors view highlights what was asked and what was done.
    page.click(f"#tn-{best} circle")
    page.wait_for_selector(f".inspector[data-node='{best}']")
    page.click("[role=tab][data-tab=anchors]")
    page.wait_for_selector("#skeleton-code .line.anchor-marker")
    assert page.locator("#skeleton-code .line.anchor, #skeleton-code .line.anchor-marker").count() >= 2
    assert page.locator("#filled-code .line.filled").count() >= 1
    assert page.locator("#skeleton-code .hljs-keyword").count() > 0  # syntax-highlighted
    screenshot(page, "06-inspector-anchors")
    page.click("[role=tab][data-tab=diff]")
    assert page.locator("table.diff td.add").count() >= 1
    page.click("[role=tab][data-tab=checks]")
    assert page.locator("#integrity .badge").count() >= 1
    screenshot(page, "07-inspector-checks")

    # Download the winner and check it independently with the kernels CLI.
    with page.expect_download() as download:
        page.click("#download-kernel")
    winner = SCREENSHOTS.parent / "winner.py"
    download.value.save_as(winner)
    done = subprocess.run([sys.executable, "-m", "kernels", "evaluate", str(PROBLEM), str(winner), "--json",
                           "--trials", "2", "--runs", "3", "--warmup", "1", "--baselines", "eager", "--no-roofline",
                           "--fuzz", "off", "--no-profile"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["verdict"] == "pass"
    lap("winner re-checked by the kernels CLI")

    # Compare the root with the winner (pin one, open the other).
    page.click("#tn-0 circle")
    page.wait_for_selector(".inspector[data-node='0']")
    page.click("#pin-node")
    page.click(f"#tn-{best} circle")
    page.wait_for_selector(f".inspector[data-node='{best}'] #compare-link:not([hidden])")
    page.click("#compare-link")
    page.wait_for_selector("#compare-metrics")
    assert "pass" in page.inner_text("#compare-metrics")
    assert page.locator("#compare-diff td.add, #compare-diff td.chg-b").count() >= 1
    screenshot(page, "08-compare")

    # Fork a new run from the winner (its root is the winner's code); the page opens it.
    page.goto(f"{base}/runs/{run_id}/#node-{best}")
    page.wait_for_selector(f".inspector[data-node='{best}'] #fork-node")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#fork-node")
    page.wait_for_url(lambda url: url.rstrip("/").rsplit("/", 1)[-1].isdigit() and f"/runs/{run_id}/" not in url)
    page.wait_for_selector("#tn-0", state="attached")
    forked = int(page.url.rstrip("/").rsplit("/", 1)[1])
    assert forked != run_id
    assert page.evaluate("() => window.stark.state.run.forked_from") == {"run": run_id, "node": best}
    # Cancel it from its page: the status changes live.
    page.wait_for_selector("[data-action=cancel]:not([disabled])")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("[data-action=cancel]")
    page.wait_for_function("() => window.stark.state.run.status === 'cancelled'", timeout=60_000)
    assert page.is_disabled("[data-action=pause]")
    screenshot(page, "09-fork-cancelled")

    page.goto(f"{base}/runs/")
    assert f"#{run_id}" in page.inner_text("#runs-table")
    screenshot(page, "10-runs-list")
    assert errors == []

    # A foreign user sees neither the page nor the socket's events.
    other = browser.new_context(viewport={"width": 1200, "height": 800})
    foreign = other.new_page()
    log_in(foreign, base, "eve", "pw-eve-123")
    response = foreign.goto(f"{base}/runs/{run_id}/")
    assert response.status == 404
    assert foreign.request.get(f"{base}/api/runs/{run_id}").status == 404
    code = foreign.evaluate("""(url) => new Promise((done) => {
      const ws = new WebSocket(url);
      ws.onmessage = () => done("message");
      ws.onclose = (e) => done(e.code);
    })""", f"{base.replace('http', 'ws')}/ws/runs/{run_id}/")
    assert code == 4403
    foreign.goto(f"{base}/runs/")
    assert f"/runs/{run_id}/" not in foreign.content()
    screenshot(foreign, "11-foreign-user")
    other.close()
    context.close()
