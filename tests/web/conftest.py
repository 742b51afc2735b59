"""Fixtures of the UI tests: named users, example problems, and (browser tests) Debian's chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
EXAMPLES = ROOT / "examples" / "problems"
SCREENSHOTS = Path(os.environ.get("STARK_TEST_ARTIFACTS", ROOT / "test-artifacts")) / "screenshots"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
WORKER_CLASS = ("--worker-class", "stark_web.studio.service.worker.Worker")


@pytest.fixture
def owner(django_user_model):
    return django_user_model.objects.create_user("ada", password="pw-ada-123")


@pytest.fixture
def stranger(django_user_model):
    return django_user_model.objects.create_user("eve", password="pw-eve-123")


@pytest.fixture
def relu_source() -> str:
    return (EXAMPLES / "level1" / "relu.py").read_text()


@pytest.fixture
def browser():
    """Headless Debian chromium through Playwright (never a downloaded browser)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("needs Debian's chromium at /usr/bin/chromium (make setup installs it)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
