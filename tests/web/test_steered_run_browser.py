"""The run, new-run and suite pages over seeded rows (no worker, no evaluation) in chromium at 1366 and 390 px:
steering leaves a trace (confirmed where it was made, listed with who and when after a reload, the attempts it
produced marked steered in the tree, the leaderboard, the API and the bundle's report); the end estimate moves and
its arithmetic holds the cases of tests/web/estimate_cases.json; a phase clock never goes back; device choices come
from the live workers (a device no worker serves is shown, disabled, with why: new run, suite, fork, extend); suite
teams that need a key say so; the suite API's numbers are numbers; the new-run page is compact on a phone; no
attempt's marks beside "The reference is fastest"."""

from __future__ import annotations

import io
import json
import time
import zipfile
from pathlib import Path

import pytest

from tests.web.conftest import SCREENSHOTS, screenshot
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CASES = json.loads((Path(__file__).with_name("estimate_cases.json")).read_text())
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1366, "height": 900}
CPU_ONLY = not Path("/dev/nvidia0").exists()
KEYS = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "DEEPSEEK_API_KEY",
        "STARK_LLM_BASE_URL", "STARK_LLM_BASE_URLS")


@pytest.fixture
def no_llm_keys(monkeypatch):
    """The server starts with no LLM key (its environment is this process's): LLM teams say "no key"."""
    for key in KEYS:
        monkeypatch.delenv(key, raising=False)


@pytest.fixture
def seeded(owner):
    """Made before the browser starts (Playwright's loop then owns the thread: no ORM in the test's body).
    A running run whose #1 was pinned and given a hint by ada (its child #3, in flight, records both) and whose #4
    coded ada's own plan; a finished run the reference won; a run on cuda (no worker serves it on a CPU host); a
    paused suite of those two, stored with its numbers as a form sent them (text)."""
    from search.engine.steering import entry, steered_entry
    from stark_web.studio.models import Node
    from stark_web.studio.suites.models import Suite, SuiteMember
    from tests.kernels.conftest import CLAMP
    from tests.web.seed import result, seeded_run, store_verdict

    run = seeded_run(owner, name="steered")
    now = time.time()
    pin = {**entry("ada", "pin"), "at": now - 50}
    hint = {**entry("ada", "hint", {"text": "keep the clamp in registers"}), "at": now - 49}
    plan = {**entry("ada", "try", {"instructions": ["vectorize the clamp by 8"], "from_node": 1}), "at": now - 48}
    Node.objects.filter(run=run, node_id=1).update(human=[pin, hint])
    Node.objects.create(run=run, node_id=3, parent=1, attempt=3, role="plan+code", status="building", source="",
                        created_at=now - 10, usage={},
                        human=[steered_entry(pin, "pin", 1), steered_entry(hint, "hint", 1)])
    Node.objects.create(run=run, node_id=4, parent=1, attempt=4, role="plan+code", status="done", verdict="pass",
                        source=CLAMP, runtime_ms=15.0, instructions=["vectorize the clamp by 8"],
                        result=result(15.0, []), created_at=now - 45, finished_at=now - 20, usage={}, human=[plan])
    run = store_verdict(run)
    run.status, run.budget, run.attempts, run.parallel, run.started_at, run.stop_reason = "running", 8, 4, 1, None, ""
    run.meta = {**(run.meta or {}), "steering": {"pins": [], "pruned": [], "tries": []}}
    run.save()
    reference_won = seeded_run(owner, best_ms=60.0, name="reference wins", roofline_pct=None)
    on_cuda = seeded_run(owner, name="on cuda")
    on_cuda.device, on_cuda.status, on_cuda.stop_reason = "cuda", "running", ""
    on_cuda.save()
    suite = Suite.objects.create(owner=owner, name="two problems", budget=3, status="paused", max_active=2,
                                 teams=[{"label": "rules", "team": "rules", "team_options": {}}],
                                 settings={"parallel": "2", "device": "cpu", "seed": "0"})
    for k, member in enumerate((reference_won, on_cuda)):
        SuiteMember.objects.create(suite=suite, position=k, key=f"level1/{member.name.replace(' ', '_')}",
                                   level="level1", problem=member.problem, team="rules", run=member)
    return {"run": run.pk, "reference_won": reference_won.pk, "on_cuda": on_cuda.pk, "suite": suite.pk}


def open_node(page, node: int) -> None:
    page.evaluate(f"() => window.stark.openNode({node})")
    page.wait_for_selector(f".inspector[data-node='{node}']")


def check_steering(page, base: str, run: int, width: str) -> None:
    # The tree and the leaderboard mark the attempts a person produced; #1 (acted on, not produced) is not.
    page.wait_for_selector("#tree g.node[data-id='4']")
    assert "steered" in (page.get_attribute("#tree g.node[data-id='3']", "class") or "")
    assert "steered" in (page.get_attribute("#tree g.node[data-id='4']", "class") or "")
    assert "steered" not in (page.get_attribute("#tree g.node[data-id='1']", "class") or "")
    assert "steered" in (page.text_content("#tree g.node[data-id='3'] text.label") or "")
    page.wait_for_selector("#leaderboard tr[data-node='4'] .badge.steered", state="attached")
    assert not page.query_selector("#leaderboard tr[data-node='1'] .badge.steered")

    # #1's inspector lists what ada did there, who and when, and what it produced.
    open_node(page, 1)
    actions = page.inner_text("#human-events")
    assert "ada asked to expand this node next" in actions and "produced #3" in actions, actions
    assert "keep the clamp in registers" in actions and "UTC" in actions
    assert page.get_attribute("#human-events li[data-action=pin] time", "datetime")
    # Expand next: confirmed where it was made, still there after the pane reloads, and listed.
    pins = page.locator("#human-events li[data-action=pin]").count()
    page.click("#steer-pin")
    page.wait_for_function("() => /#1 is expanded next/.test(document.querySelector('#steer-confirm')?.textContent)")
    page.wait_for_function(f"() => document.querySelectorAll('#human-events li[data-action=pin]').length > {pins}")
    assert "#1 is expanded next" in page.inner_text("#steer-confirm")
    # the pin waits for a free slot ("expands next"), or the search took it at once: the new attempt is named
    newest = page.inner_text("#human-events li[data-action=pin] >> nth=-1")
    assert page.is_visible("#node-expands-next") or "produced #" in newest, newest
    page.fill("#hint-text", f"try a 2-D grid ({width} px)")
    page.click("#hint-form button[type=submit]")
    page.wait_for_function("() => /receive your hint/.test(document.querySelector('#steer-confirm')?.textContent)")
    page.wait_for_function(f"() => /a 2-D grid \\({width} px\\)/.test(document.querySelector('#human-events').textContent)")
    if width == "1366":
        screenshot(page, "steered-run")  # docs/screens/steered-run.png
    # A reload: the list is the server's.
    page.goto(f"{base}/runs/{run}/#node-1")
    page.wait_for_selector(".inspector[data-node='1'] #human-events")
    actions = page.inner_text("#human-events")
    assert f"a 2-D grid ({width} px)" in actions and actions.count("asked to expand this node next") > pins - 1
    open_node(page, 3)
    assert page.is_visible("#node-steered")
    assert "chose this attempt: “expand next” on #1" in page.inner_text("#human-events")
    assert "shaped this plan: a hint on #1" in page.inner_text("#human-events")
    open_node(page, 4)
    assert "gave the plan this attempt codes" in page.inner_text("#human-events")

    # The API and the bundle's report say the same.
    assert page.request.get(f"{base}/api/runs/{run}/nodes/3").json()["steered"] is True
    assert page.request.get(f"{base}/api/runs/{run}/nodes/2").json()["steered"] is False
    bundle = zipfile.ZipFile(io.BytesIO(page.request.get(f"{base}/api/runs/{run}/bundle.zip?node=4").body()))
    report = bundle.read("report.md").decode()
    assert "| Steered | yes, by ada" in report and "## Human steering" in report, report
    assert json.loads(bundle.read("report.json"))["node"]["steered"] is True


def check_progress(page) -> None:
    # The end estimate: a range while few attempts finished, and it moves while #3 runs.
    page.wait_for_function("() => /left/.test(document.querySelector('#estimate').textContent)")
    text = page.inner_text("#estimate")
    assert "–" in text, text  # 3 finished + the reference: unsure, so a range
    first = page.get_attribute("#estimate", "data-seconds")
    page.wait_for_function(f"() => document.querySelector('#estimate').dataset.seconds !== '{first}'", timeout=4_000)
    # The estimate's arithmetic, the cases the docs state, computed by the page's own module.
    url = page.evaluate("() => document.querySelector('script[src*=\"run_page\"]').src.replace('run_page', 'estimate')")
    inputs = [c["input"] | ({"attempts": [{"created_at": i * c["input"]["attempts"]["every_s"],
                                           "finished_at": (i + 1) * c["input"]["attempts"]["every_s"]}
                                          for i in range(c["input"]["attempts"]["count"])]}
                            if isinstance(c["input"]["attempts"], dict) else {}) for c in CASES]
    got = page.evaluate("async ([url, inputs]) => { const m = await import(url); "
                        "return inputs.map((i) => m.endEstimate(i)); }", [url, inputs])
    for case, answer in zip(CASES, got, strict=True):
        assert {k: answer.get(k) for k in case["expect"]} == case["expect"], case["name"]
    # Never frozen, never jumping beyond the evidence: 140 s with an attempt past its time, then it finishes.
    base_input = inputs[2]
    steps = page.evaluate("async ([url, a]) => { const m = await import(url); const f = (now, done) => "
                          "m.endEstimate({...a, now, attempts: a.attempts.map((x, i) => i === 4 && done ? "
                          "{...x, finished_at: now} : x), used: a.used}); "
                          "return [f(1050, false), f(1190, false), f(1190, true)]; }", [url, base_input])
    assert steps[1]["seconds"] != steps[0]["seconds"]  # 140 s later with #5 overdue: it moved
    assert abs(steps[2]["per"] - steps[1]["per"]) <= steps[1]["per"] / (steps[1]["finished"] + 1) + 1e-9

    # A phase clock never goes back within a phase: a late message with a smaller clock keeps the larger.
    page.evaluate("""() => { const s = window.stark.state;
        s.applyChange({type: 'node.phase', node: 3, data: {changes: {eval_phase: 'build', eval_phase_s: 37, eval_elapsed_s: 40}}});
        s.applyChange({type: 'node.phase', node: 3, data: {changes: {eval_phase: 'build', eval_phase_s: 1, eval_elapsed_s: 41}}}); }""")
    assert page.evaluate("() => window.stark.state.nodes.get(3).eval_phase_s") == 37
    page.wait_for_function("() => /#3: build 37 s/.test(document.querySelector('[data-fig=phase]').textContent)")


def test_steering_progress_devices_and_the_small_things(no_llm_keys, seeded, daphne_server, browser):
    for width in ("1366", "390"):
        check_pages(seeded, daphne_server, browser, width)


def check_pages(seeded: dict, base: str, browser, width: str) -> None:
    viewport = DESKTOP if width == "1366" else PHONE
    context = browser.new_context(viewport=viewport, has_touch=width == "390")
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{seeded['run']}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    check_progress(page)
    check_steering(page, base, seeded["run"], width)
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")

    # No attempt's marks beside "The reference is fastest".
    page.goto(f"{base}/runs/{seeded['reference_won']}/")
    page.wait_for_selector("#conn[data-state=live]", state="attached")
    page.wait_for_function("() => /The reference is fastest/.test(document.querySelector('[data-fig=best]').textContent)")
    assert page.inner_text("[data-fig=marks]").strip() == ""

    if CPU_ONLY:
        # Fork and extend on a device no worker serves: shown, not possible, with why.
        page.goto(f"{base}/runs/{seeded['on_cuda']}/")
        page.wait_for_selector("#conn[data-state=live]", state="attached")
        assert "no worker of this instance serves cuda" in page.inner_text("#extend-why")
        assert page.is_disabled("#extend-by") and page.is_disabled("[data-action=extend] button")
        open_node(page, 1)
        assert page.is_disabled("#fork-node") and "serves cuda" in page.inner_text("#fork-why")

    # The new-run page: cuda shown but not selectable, with why; advanced settings folded; compact on a phone.
    page.goto(f"{base}/runs/new/")
    if CPU_ONLY:
        assert page.is_disabled("#id_device option[value=cuda]")
        assert "no worker" in (page.get_attribute("#id_device option[value=cuda]", "title") or "")
        assert page.input_value("#id_device") == "cpu"
    assert page.get_attribute("#advanced-settings", "open") is None and not page.is_visible("#id_seed")
    assert page.get_attribute("#llm-details", "open") is None
    height = page.evaluate("() => document.documentElement.scrollHeight")
    assert height <= (2400 if width == "390" else 1600), height  # a phone: under half its height before
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    screenshot(page, f"new-run-{width}")

    # The new-suite page: a device select like the new run's, "no key" on the LLM teams, the help not cut.
    page.goto(f"{base}/suites/new/")
    assert page.evaluate("() => document.querySelector('#id_device').tagName") == "SELECT"
    if CPU_ONLY:
        assert page.is_disabled("#id_device option[value=cuda]")
        assert "no worker" in page.inner_text(".device-why[data-device=cuda]")
    assert page.is_visible("#suite-no-llm")
    assert page.is_visible("[data-team=stark] .no-key") and not page.query_selector("[data-team=rules] .no-key")
    assert page.get_attribute("#id_max_active", "placeholder") is None and page.is_visible("#max-active-help")
    help_box = page.locator("#max-active-help").bounding_box()
    assert help_box and help_box["x"] + help_box["width"] <= viewport["width"], help_box

    # The suite page and its API: the numbers a form sent as text are numbers.
    page.goto(f"{base}/suites/{seeded['suite']}/")
    page.wait_for_load_state("networkidle")
    answer = page.request.get(f"{base}/api/suites/{seeded['suite']}").json()
    suite = answer.get("suite", answer)
    assert suite["settings"]["parallel"] == 2 and suite["settings"]["seed"] == 0, suite["settings"]
    screenshot(page, f"suite-{width}")  # docs/screens/suite.png: the 1366 px one
    assert errors == [], errors
    context.close()
    assert (SCREENSHOTS / f"suite-{width}.png").exists()
