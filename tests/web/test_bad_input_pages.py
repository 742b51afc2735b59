"""Dead ends, in Debian's chromium against a real daphne (its problem checks run real harness children):
a 5 MB upload, a problem that hangs at import and a binary file each end in a readable message within 10 s with
the form intact; styled 404 pages for another user's run, a missing run and a missing compare node; no page
scrolls sideways at 390 px; no console errors (favicon included) on any page."""

from __future__ import annotations

import time

import pytest

from tests.web.seed import RELU, seeded_run
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import shot, watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

HANGS = RELU.replace('import torch.nn as nn\n', 'import torch.nn as nn\nimport time\n\ntime.sleep(600)\n')
PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8
NO_SCROLL = "() => document.documentElement.scrollWidth <= window.innerWidth"


@pytest.fixture
def fast_checks(monkeypatch):
    """A 5 s problem-check deadline (the default is 30 s) for the daphne started after it."""
    monkeypatch.setenv("STARK_CHECK_TIMEOUT_S", "5")
    monkeypatch.setenv("STARK_CHECK_BUSY_LOAD", "1e9")  # one try: these checks time a hang, not the host


@pytest.fixture
def run(owner):
    return seeded_run(owner)


def within(seconds: float, started: float) -> None:
    assert time.monotonic() - started < seconds, f"took {time.monotonic() - started:.1f} s"


def test_bad_inputs_end_in_readable_messages_with_the_form_intact(run, fast_checks, daphne_server, browser):
    base = daphne_server
    context = browser.new_context(viewport={"width": 1300, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors, expected=(400, 413))  # the refusals this test provokes
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/runs/new/")
    # The user's own text in the editor (set without an input event, so no check of it is in flight).
    page.evaluate("() => { document.getElementById('id_problem_source').value = '# my own notes\\n'; }")

    # A 5 MB file: refused by its size before it is read or sent.
    started = time.monotonic()
    page.set_input_files("#id_problem", files=[{"name": "huge.py", "mimeType": "text/x-python",
                                                "buffer": b"#" * (5 << 20)}])
    page.wait_for_selector("#problem-error[data-kind=too-big]", timeout=10_000)
    within(10, started)
    assert "5.0 MB" in page.inner_text("#problem-error") and "256 KB" in page.inner_text("#problem-error")
    assert page.input_value("#id_problem_source") == "# my own notes\n"  # the editor keeps the user's text
    assert page.evaluate("() => document.getElementById('id_problem').files.length") == 1  # and the file stays
    shot(page, "07-upload-too-large")
    # Sent anyway (no JS check in the way): the server answers 413 in words, from the Content-Length alone.
    started = time.monotonic()
    answer = page.evaluate("""async () => {
      const body = new FormData();
      body.append("problem", new Blob(["#".repeat(5 * 1024 * 1024)]), "huge.py");
      const r = await fetch("/runs/new/validate", {method: "POST", body, headers: {"HX-Request": "true"}});
      return [r.status, await r.text()];
    }""")
    within(10, started)
    assert answer[0] == 413 and "accepts problems up to 256 KB" in answer[1] and 'id="problem-error"' in answer[1]
    big = page.request.post(f"{base}/runs/new/", multipart={"problem": {"name": "huge.py", "mimeType": "text/plain",
                                                                       "buffer": b"#" * (5 << 20)}})
    assert big.status == 413 and "Upload too large" in big.text() and "topnav" in big.text()

    # A binary file: named as such, never dumped into the editor.
    started = time.monotonic()
    page.set_input_files("#id_problem", files=[{"name": "model.pt", "mimeType": "application/octet-stream",
                                                "buffer": PNG}])
    page.wait_for_selector("#problem-error[data-kind=binary]", timeout=10_000)
    within(10, started)
    assert "model.pt is a binary file, not Python source text" in page.inner_text("#problem-error")
    assert page.input_value("#id_problem_source") == "# my own notes\n"
    shot(page, "08-binary-file")

    # A problem that hangs at import: "checking… N s (gives up within 8 s)" (the 5 s limit plus 3 s), then a message.
    page.set_input_files("#id_problem", files=[])
    started = time.monotonic()
    page.fill("#id_problem_source", HANGS)
    page.wait_for_function("() => /checking… \\d+ s \\(gives up within 8 s\\)/.test("
                           "document.getElementById('validating').textContent)", timeout=5_000)
    page.wait_for_function("() => /5 s/.test((document.querySelector('#problem-error:not([data-kind])') || {})"
                           ".textContent || '')", timeout=12_000)  # the server's answer
    within(12, started)  # 1.2 s of typing delay + the 5 s deadline
    text = page.inner_text("#problem-error")
    assert "5 s" in text and ("import" in text or "took longer" in text), text
    shot(page, "09-hanging-problem")

    # A rejected submit keeps the file's name, the text, and shows why in the check panel.
    bad = RELU.replace("def get_inputs", "def not_inputs")
    page.set_input_files("#id_problem", files=[{"name": "mine.py", "mimeType": "text/x-python",
                                                "buffer": bad.encode()}])
    page.wait_for_function("() => document.getElementById('id_problem_source').value.includes('not_inputs')")
    page.wait_for_function("() => (document.querySelector('#problem-error:not([data-kind])') || {}).textContent"
                           "?.includes('get_inputs')", timeout=20_000)  # its check answered first
    page.select_option("#id_team", "rules")
    page.click("#start-run")
    page.wait_for_selector("#validation #problem-error", timeout=20_000)
    assert "get_inputs" in page.inner_text("#validation")
    assert "not_inputs" in page.input_value("#id_problem_source")
    assert "mine.py" in page.inner_text("#file-note")
    shot(page, "10-rejected-submit-keeps-form")
    assert errors == [], errors
    context.close()


def test_error_pages_narrow_screens_and_a_clean_console(run, stranger, daphne_server, browser):
    base = daphne_server
    errors: list[str] = []
    # Another user's run, a missing run, a missing node in compare: 404 in the app's layout.
    other = browser.new_context(viewport={"width": 1200, "height": 800})
    foreign = other.new_page()
    watch_errors(foreign, errors, expected=(404,))
    log_in(foreign, base, "eve", "pw-eve-123")
    for url in (f"/runs/{run.pk}/", "/runs/99999/", f"/compare/?a={run.pk}:0&b={run.pk}:7"):
        response = foreign.goto(base + url)
        assert response.status == 404, url
        assert foreign.is_visible("#error-page") and foreign.is_visible("nav.topnav"), url
        assert "Not found" in foreign.inner_text("h1")
    assert f"no run {run.pk} that you can see" in foreign.inner_text("#error-page")
    shot(foreign, "11-styled-404")
    other.close()

    # 390 px wide: no page scrolls sideways; and no console error on any page (favicon, CSP, scripts).
    narrow = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1)
    page = narrow.new_page()
    watch_errors(page, errors, expected=(404,))  # the missing run's page
    page.goto(f"{base}/accounts/login/")
    assert page.evaluate(NO_SCROLL), "login"
    log_in(page, base, "ada", "pw-ada-123")
    pages = {"runs": "/runs/", "new": "/runs/new/", "run": f"/runs/{run.pk}/#node-1",
             "compare": f"/compare/?a={run.pk}:0&b={run.pk}:1", "missing": "/runs/99999/"}
    for name, url in pages.items():
        page.goto(base + url)
        if name == "run":
            page.wait_for_selector(".inspector[data-node='1']")
        page.wait_for_load_state("networkidle")
        wide = page.evaluate("""() => [...document.querySelectorAll('body *')]
          .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
          .slice(0, 5).map(e => e.tagName + '#' + e.id + '.' + e.className)""")
        assert page.evaluate(NO_SCROLL), f"{name} scrolls sideways at 390 px: {wide}"
        shot(page, f"12-390px-{name}")
    narrow.close()
    assert errors == [], errors
