"""The suite page, in chromium against a real daphne and real workers: a suite of 3 CPU problems × 2 teams (two scripted
configurations) created from a zip on the New suite form fills its grid live, a cell opens its run's tree, the tables
and figures are drawn (and fit 390 px), and the CSV/JSON/Markdown downloads carry the page's figures."""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from pathlib import Path

import pytest

from tests.web.conftest import WORKER_CLASS, screenshot
from tests.web.test_browser_flow import log_in
from tests.web.test_honest_numbers import watch_errors

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

# KernelBench-format files, small enough that an evaluation takes seconds on a busy 2-core machine.
TESTS = Path(__file__).resolve().parents[1]
PROBLEMS = {"level1/relu_scale.py": TESTS / "engine/fixtures/tiny_relu_scale.py",
            "level1/softmax.py": TESTS / "kernels/fixtures/problem_tiny_softmax.py",
            "level2/scale_add.py": TESTS / "kernels/fixtures/problem_scale_add.py"}
# The grid and its figures are the subject: no fuzzing stage, no profile.
EVAL = {"correctness_trials": 2, "timing_runs": 3, "warmup_runs": 1, "baselines": ["eager"], "roofline": False,
        "fuzz": "off", "profile": False}
TEAMS = [{"label": "steady", "team": "scripted", "team_options": {"script": "ok"}},
         {"label": "broken", "team": "scripted", "team_options": {"script": "fail"}}]
FAST = {"STARK_RETIME_AT_END": "0", "STARK_REAP_INTERVAL_S": "2"}


def level_zip(folder: Path) -> Path:
    path = folder / "kb.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, problem in PROBLEMS.items():
            archive.writestr(f"KernelBench/{name}", problem.read_text())
    return path


def download(page, export: str) -> bytes:
    with page.expect_download() as info:
        page.click(f"#suite-exports a[data-export='{export}']")
    return Path(info.value.path()).read_bytes()


def page_metric(page, team: str, suite: str, name: str) -> str:
    return page.get_attribute(f"#table1 td[data-team='{team}'][data-suite='{suite}'][data-metric='{name}'], "
                              f"#table2 td[data-team='{team}'][data-suite='{suite}'][data-metric='{name}']", "data-value")


def test_a_suite_from_a_zip_fills_its_grid_and_exports_the_pages_figures(owner, daphne_server, start_worker,
                                                                          browser, tmp_path):
    started = time.monotonic()
    start_worker("search", *WORKER_CLASS, "--with-scheduler", **FAST)
    start_worker("gpu", *WORKER_CLASS, **FAST)
    base = daphne_server
    context = browser.new_context(viewport={"width": 1366, "height": 900}, accept_downloads=True)
    page = context.new_page()
    errors: list[str] = []
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")

    page.goto(f"{base}/suites/new/")
    assert page.is_visible("#start-suite")
    # Created from the browser through the API (the form posts to the same create_from), with the zip.
    token = page.evaluate("() => document.cookie.match(/csrftoken=([^;]+)/)[1]")
    zipped = level_zip(tmp_path)
    answer = page.request.post(f"{base}/api/suites", headers={"X-CSRFToken": token}, multipart={
        "zip": {"name": "kb.zip", "mimeType": "application/zip", "buffer": zipped.read_bytes()},
        "teams": json.dumps(TEAMS), "budget": "1", "eval": json.dumps(EVAL)})
    assert answer.status == 201, answer.text()
    page.goto(f"{base}{answer.json()['url']}")
    suite_id = int(page.url.rstrip("/").rsplit("/", 1)[1])

    # The grid: 3 problems × 2 teams, filling live (no reload) until every run ended.
    page.evaluate("() => { window.__sameDocument = true; }")
    page.wait_for_function("() => document.querySelectorAll('#suite-grid td[data-team]').length === 6")
    keys = page.eval_on_selector_all("#suite-grid tbody tr", "rows => rows.map(r => r.dataset.key)")
    capacity = page.text_content("#suite-capacity") or ""  # its runs at once x parallel against the gpu workers
    assert capacity.startswith("up to ") and "attempts in flight" in capacity and "for 1 gpu worker" in capacity, \
        capacity
    assert "idle" not in capacity  # 1 worker: the suite's attempts in flight keep it busy
    assert keys == ["level1/relu_scale", "level1/softmax", "level2/scale_add"]
    page.wait_for_function("() => document.querySelector('#suite-grid td[data-status=finished]')", timeout=120_000)
    screenshot(page, "suite-1366-filling")
    page.wait_for_function("() => document.querySelector('#suite-status').dataset.status === 'finished'",
                           timeout=240_000)
    assert page.evaluate("() => window.__sameDocument") is True
    print(f"suite finished after {time.monotonic() - started:.0f} s")
    statuses = page.eval_on_selector_all("#suite-grid td[data-team]", "tds => tds.map(t => t.dataset.status)")
    assert statuses == ["finished"] * 6
    speeds = {(td["key"], td["team"]): td["value"] for td in page.eval_on_selector_all(
        "#suite-grid td[data-team]", "tds => tds.map(t => ({key: t.dataset.key, team: t.dataset.team, value: "
        "(t.querySelector('[data-role=speed]') || {dataset: {}}).dataset.value}))")}
    # a steady cell shows its run's figure, or none when the verdict found it not measurable on this (busy) host;
    # either way the page and the CSV agree (below); the broken team never has one
    assert not any(speeds[(k, "broken")] for k in keys)
    assert page.get_attribute("#fig-dist", "data-points") == str(sum(bool(v) for v in speeds.values()))
    screenshot(page, "suite-1366-finished")

    # Downloads: the figures the page shows.
    results = json.loads(download(page, "results.json"))
    for team in ("steady", "broken"):
        summary = results["teams"][team]["summary"]["all"]
        for name, value in (("eager.success", summary["eager"]["success"]), ("eager.Fast_1", summary["eager"]["Fast_1"]),
                            ("eager.mean_speedup_solved", summary["eager"]["mean_speedup_solved"]),
                            ("attempts.compile_rate", summary["attempts"]["compile_rate"])):
            shown = page_metric(page, team, "all", name)
            assert (float(shown) if shown else None) == pytest.approx(value), (team, name, shown, value)
    rows = list(csv.DictReader(io.StringIO(download(page, "results.csv").decode())))
    assert len(rows) == 6
    for row in rows:
        shown = speeds[(f"{row['level']}/{row['problem']}", row["team"])]
        assert (float(shown) if shown else None) == (float(row["speedup_vs_eager"]) if row["speedup_vs_eager"]
                                                     else None), row
    report = download(page, "report.md").decode()
    for team in ("steady", "broken"):
        section = report.split(f"## {team}\n", 1)[1]
        line = next(ln for ln in section.splitlines() if ln.startswith("| all | eager |"))
        cells = [c.strip() for c in line.strip("|").split("|")]
        success = page.inner_text(f"#table1 td[data-team='{team}'][data-suite='all'][data-metric='eager.success']")
        fast = page.inner_text(f"#table1 td[data-team='{team}'][data-suite='all'][data-metric='eager.Fast_1']")
        assert cells[3:5] == [success, fast], (team, line)
    assert zipfile.ZipFile(io.BytesIO(download(page, "trees.zip"))).namelist()[0] == "steady/level1__relu_scale.json"

    # A cell opens its run's live tree.
    page.click("#suite-grid td[data-key='level1/relu_scale'][data-team='steady'] a")
    page.wait_for_url(f"{base}/runs/*/")
    page.wait_for_function("() => document.querySelectorAll('#tree g.node').length >= 2", timeout=60_000)
    context.close()

    # At 390 px the page and its figures fit the width.
    phone = browser.new_context(viewport={"width": 390, "height": 844})
    page = phone.new_page()
    watch_errors(page, errors)
    log_in(page, base, "ada", "pw-ada-123")
    page.goto(f"{base}/suites/{suite_id}/")
    page.wait_for_function("() => document.querySelector('#fig-dist svg circle')")
    for sel in ("#fig1 svg", "#fig-dist svg"):
        box = page.locator(sel).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 390, (sel, box)
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390 + 1
    screenshot(page, "suite-390")
    phone.close()
    assert errors == [], errors
