"""The inspector's Timing tab shows the candidate's profile (kernels/shared/profile.py) as a table and the Nsight Compute
section (here its note: a CPU device), in Debian's chromium against a real daphne; the results are those of real
harness evaluations of the ReLU problem's reference and its clamp_min candidate (the problem at a smaller size)."""

from __future__ import annotations

import pytest

from kernels import EvalSettings, evaluate, reference_candidate
from stark_web.studio.models import Node
from tests.kernels.conftest import CLAMP, RELU
from tests.web.conftest import SCREENSHOTS
from tests.web.seed import seeded_run
from tests.web.test_browser_flow import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


# The ReLU problem at 1/16 of its size: its outputs are judged in this process (4 M floats a trial at full size).
SMALL = "dim = 65536"  # the size the witness can time on a busy 2-core host (smaller calls are preempted inside their windows)
SMALL_RELU, SMALL_CLAMP = RELU.replace("dim = 65536", SMALL), CLAMP.replace("dim = 65536", SMALL)


@pytest.fixture
def profiled_run(owner, tmp_path):
    """A stored run whose reference and best node carry real evaluation results (profiles included)."""
    # The profile is the subject: no fuzzing stage or roofline, and harness children forked warm from the zygote
    # (sandbox "none": the sandbox is not this test's subject)
    settings = EvalSettings(cache_dir=str(tmp_path / "cache"), correctness_trials=1, timing_runs=5, warmup_runs=1,
                            baselines=(), build_timeout_s=180, run_timeout_s=60, memory_limit_mb=4096, ncu=True,
                            fuzz="off", roofline=False, sandbox="none")
    assert SMALL in SMALL_RELU and SMALL in SMALL_CLAMP
    run = seeded_run(owner, name="profiled")
    for node_id, source in ((0, reference_candidate(SMALL_RELU)), (1, SMALL_CLAMP)):
        result = evaluate(SMALL_RELU, source, settings)
        assert result.verdict == "pass" and result.profile and result.profile["kernels"], result.reasons
        Node.objects.filter(run=run, node_id=node_id).update(result=result.to_dict(),
                                                             runtime_ms=result.timing["median_ms"])
    return run, Node.objects.get(run=run, node_id=1).result["profile"]


def test_the_timing_tab_shows_the_profile_table(profiled_run, daphne_server, browser) -> None:
    run, profile = profiled_run
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    log_in(page, daphne_server, "ada", "pw-ada-123")
    page.goto(f"{daphne_server}/runs/{run.pk}/")
    page.click("#tn-1 circle")
    page.wait_for_selector(".inspector[data-node='1']")
    page.click("[role=tab][data-tab=timing]")
    table = page.locator("#profile-table")
    table.wait_for()
    rows = table.locator("tbody tr")
    assert rows.count() == len(profile["kernels"])
    first = rows.nth(0).inner_text()
    top = profile["kernels"][0]
    assert top["name"] in first and f"{100 * top['share']:.0f}%" in first, first
    assert "aten::clamp_min" in table.inner_text()  # the candidate's own op, not the reference's relu
    assert "CPU ops by self time" in page.inner_text("#node-profile")
    assert "not on a CPU device" in page.inner_text("#ncu-note")  # ncu asked for: why there are no metrics
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "inspector-profile.png"), full_page=True)
    page.click("#tn-0 circle")  # the reference has its own profile (what the agents compare against)
    page.wait_for_selector(".inspector[data-node='0']")
    page.click("[role=tab][data-tab=timing]")
    assert "aten::relu" in page.inner_text("#profile-table")
    assert not errors, errors
