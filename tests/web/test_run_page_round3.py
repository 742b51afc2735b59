"""The run and account pages in chromium at 390 and 1366 px against a real daphne: actions wait for the live socket;
the run's estimate appears and moves; device=cuda on a CPU-only instance is refused with the available devices named
(API and form); the inspector is in view after tapping a node on a phone; a user changes their password and revokes a
token on the Account page. With a real gpu worker: during a CPU C++ build the phase text changes at least
every 3 s."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest

from tests.web.conftest import WORKER_CLASS, screenshot
from tests.web.seed import seeded_run
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FIXTURES = Path(__file__).resolve().parents[1] / "kernels" / "fixtures"
PHONE, DESKTOP = {"width": 390, "height": 844}, {"width": 1366, "height": 900}

# The socket's messages are held until the test releases them: the page stays "Connecting…" meanwhile.
HOLD_SOCKET = """(() => {
  const Real = window.WebSocket;
  window.__held = [];
  window.__hold = true;
  window.__release = () => { window.__hold = false; for (const go of window.__held.splice(0)) go(); };
  window.WebSocket = class extends Real {
    constructor(...args) {
      super(...args);
      const setter = Object.getOwnPropertyDescriptor(Real.prototype, "onmessage").set;
      Object.defineProperty(this, "onmessage", { set: (fn) => setter.call(this, (m) => {
        if (window.__hold) window.__held.push(() => fn(m)); else fn(m);
      }) });
    }
  };
})();"""


@pytest.fixture
def running(owner):
    """A running run (budget 5, 3 attempts used): the reference, two finished attempts, #3 building (its evaluation
    job id set). Made before the browser starts: Playwright's loop forbids the ORM in the test's thread."""
    from stark_web.studio.models import Node
    from stark_web.studio.service import queues

    run = seeded_run(owner, name="round three")
    run.status, run.budget, run.attempts, run.started_at, run.stop_reason = "running", 5, 3, None, ""
    run.save()
    job_id = queues.make_job_id("eval", uuid.uuid4().hex[:8], 1)
    Node.objects.create(run=run, node_id=3, parent=1, attempt=3, role="plan+code", status="building",
                        source="", created_at=time.time() + 5, usage={}, phase="evaluate", job_id=job_id)
    return run, job_id


@pytest.mark.skipif(Path("/dev/nvidia0").exists(), reason="checks a CPU-only instance")
def test_the_run_page_account_and_devices_at_both_widths(running, daphne_server, browser):
    base = daphne_server
    run, _ = running
    for width, viewport in (("1366", DESKTOP), ("390", PHONE)):
        context = browser.new_context(viewport=viewport, has_touch=width == "390")
        page = context.new_page()
        errors: list[str] = []
        watch_errors(page, errors, expected=(400,))  # the refused API call answers 400
        log_in(page, base, "ada", "pw-ada-123")
        page.add_init_script(HOLD_SOCKET)
        page.goto(f"{base}/runs/{run.pk}/")
        # Connecting: every action is disabled, the download is inert.
        assert page.get_attribute("#conn", "class") == "conn connecting"
        for sel in ("[data-action=cancel]", "[data-action=pause]", "#extend-by", "#retime-run"):
            assert page.is_disabled(sel), sel
        assert page.get_attribute("#download-bundle", "aria-disabled") == "true"
        screenshot(page, f"round3-{width}-connecting")
        page.evaluate("() => window.__release()")
        page.wait_for_selector("#conn[data-state=live]", state="attached")
        page.wait_for_function("() => !document.querySelector('[data-action=cancel]').disabled")
        assert page.is_enabled("[data-action=pause]") and page.is_disabled("[data-action=resume]")
        assert page.get_attribute("#download-bundle", "aria-disabled") == "false"
        # The estimate: 2 attempts to start (budget 5, 3 used) at ~30 s each, plus what #3 still needs (at most 35 s:
        # it was made 5 s ahead of now, at most 30 s of its own); it moves.
        page.wait_for_function("() => /left/.test(document.querySelector('#estimate').textContent)")
        first = int(page.get_attribute("#estimate", "data-seconds"))
        assert 60 <= first <= 95, page.inner_text("#estimate")
        page.wait_for_function(f"() => Number(document.querySelector('#estimate').dataset.seconds) < {first}",
                               timeout=5_000)
        if width == "390":
            # Tapping a node opens the inspector as a sheet that is in view, without scrolling past the leaderboard.
            assert not page.is_visible("#inspector")
            page.tap("#tree g.node[data-id='1']")
            page.wait_for_selector("#inspector #node-phase, #inspector h2, #inspector dl", state="attached")
            box = page.locator("#inspector").bounding_box()
            assert page.is_visible("#inspector") and box and 0 <= box["y"] < viewport["height"], box
            screenshot(page, "round3-390-inspector")
            page.click("#inspector-close")
            assert not page.is_visible("#inspector")
        else:
            screenshot(page, "round3-1366-run")

        # device=cuda on this CPU-only instance: refused, naming the devices available (API and form).
        token = page.evaluate("() => document.cookie.match(/csrftoken=([^;]+)/)[1]")
        answer = page.request.post(f"{base}/api/runs", headers={"X-CSRFToken": token}, multipart={
            "problem_source": (FIXTURES / "problem_scale_add.py").read_text(), "device": "cuda", "team": "rules"})
        assert answer.status == 400 and answer.json()["field"] == "device", answer.text()
        assert "available: cpu" in answer.json()["message"]
        page.goto(f"{base}/runs/new/")
        assert "no worker serves it" in page.inner_text("#id_device option[value=cuda]")
        assert "Served: cpu" in page.inner_text("#devices-served")
        # the form offers cuda but does not let it be chosen, and says why (the API above refuses it all the same)
        assert page.is_disabled("#id_device option[value=cuda]")
        assert "available: cpu" in (page.get_attribute("#id_device option[value=cuda]", "title") or "")
        screenshot(page, f"round3-{width}-device-refused")
        assert errors == [], errors
        context.close()

    # The Account page (at 390 px): create a token, revoke it; change the password, log in with the new one.
    context = browser.new_context(viewport=PHONE)
    page = context.new_page()
    log_in(page, base, "ada", "pw-ada-123")
    page.click("#account-link")
    page.fill("#token-name", "laptop")
    page.click("#create-token")
    plain = page.inner_text("#new-token-text").strip()
    assert plain.startswith("stk_") and page.request.get(
        f"{base}/api/runs", headers={"Authorization": f"Bearer {plain}"}).status == 200
    screenshot(page, "round3-390-account")
    page.click(f"[data-revoke='{plain[:10]}']")
    page.wait_for_selector("#no-tokens")
    assert page.request.get(f"{base}/api/runs", headers={"Authorization": f"Bearer {plain}"}).status == 401
    page.fill("#id_old_password", "pw-ada-123")
    page.fill("#id_new_password1", "a-new-pass-836")
    page.fill("#id_new_password2", "a-new-pass-836")
    page.click("#change-password")
    page.wait_for_selector("text=Password changed")
    context.close()
    other = browser.new_context(viewport=DESKTOP).new_page()
    log_in(other, base, "ada", "a-new-pass-836")
    assert "/accounts/login/" not in other.url


def test_the_phase_text_moves_during_a_cpu_build(running, daphne_server, start_worker, browser):
    """A real C++ build on the gpu queue (a fresh source: nothing cached): the header's phase text for #3 changes at
    least every 3 s while it builds (kernels.parent.jobs.PhaseBeat re-publishes the phase every second)."""
    from stark_web.studio.service import queues

    base = daphne_server
    run, job_id = running
    problem = (FIXTURES / "problem_scale_add.py").read_text()
    candidate = (FIXTURES / "candidates" / "cpp_openmp.py").read_text().replace(
        "#include", f"// fresh build {uuid.uuid4().hex}\n#include", 1)
    start_worker("gpu", *WORKER_CLASS)
    queues.queue(queues.GPU_QUEUE).enqueue(queues.EVALUATE_JOB, problem, candidate, {
        "timing_runs": 3, "warmup_runs": 1, "correctness_trials": 1, "baselines": ["eager"], "roofline": False,
        "reuse_results": False, "build_timeout_s": 600, "fuzz": "off", "profile": False},  # the build starts sooner
        job_id=job_id, result_ttl=600)
    page = browser.new_context(viewport=DESKTOP).new_page()
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/{run.pk}/")
    page.wait_for_function("() => /#3: build \\d+ s/.test(document.querySelector('[data-fig=phase]').textContent)",
                           timeout=180_000)
    seen: list[tuple[float, str]] = []
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        text = page.inner_text("[data-fig=phase]")
        if "#3: build" not in text:
            break
        if not seen or seen[-1][1] != text:
            seen.append((time.monotonic(), text))
        time.sleep(0.25)
    screenshot(page, "round3-1366-building")
    gaps = [b[0] - a[0] for a, b in zip(seen, seen[1:], strict=False)]
    assert len(seen) >= 3, seen
    assert max(gaps) <= 3.0, seen
