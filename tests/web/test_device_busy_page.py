"""The run page in Debian's chromium while the reference waits for a GPU that other processes fill: its status line
says so, with the memory they hold, live through the websocket (real daphne, real workers and harness children; the
GPU is the pretend one of tests/kernels/busy_gpu.py)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.service.test_device_busy import busy_run
from tests.web.conftest import WORKER_CLASS, screenshot
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_run_page_says_the_reference_waits_for_the_gpu(owner, daphne_server, start_worker, browser):
    start_worker("search", *WORKER_CLASS, "--with-scheduler", STARK_DEVICE_BUSY_FIRST_WAIT_S="60",
                 STARK_DEVICE_BUSY_WAIT_S="600")
    start_worker("gpu", *WORKER_CLASS, STARK_DEVICE_BUSY_RERUNS_S="")
    base = daphne_server
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, base, "ada", "pw-ada-123")
    with ThreadPoolExecutor(1) as pool:  # the problem check uses async_to_sync: not in playwright's event loop
        run = pool.submit(busy_run, owner, 10**6).result()
    page.goto(f"{base}/runs/{run.pk}/")
    reason = page.locator("#run-reason")
    reason.filter(has_text="waiting for the GPU").wait_for(timeout=180_000)
    text = reason.inner_text()
    assert text.startswith("waiting for the GPU: other processes hold 79.5 GiB of its 80.0 GiB (0.50 GiB free); "
                           "the reference is evaluated again in 60 s"), text
    assert page.locator('[data-fig="status"]').inner_text() == "running"
    screenshot(page, "device-busy-waiting")
    page.reload()  # the line comes with the run itself (run.reason), not only with the event
    reason.filter(has_text="waiting for the GPU").wait_for(timeout=30_000)
    assert reason.inner_text() == text
    assert not errors, errors
