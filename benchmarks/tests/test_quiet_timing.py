from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import quiet_timing

pytestmark = pytest.mark.slow  # re-time children and busy stand-ins


def test_every_scenario_is_timed_and_only_quiet_ones_pause_the_others(tmp_path: Path) -> None:
    """The benchmark the H200 call runs, on the CPU in its smallest form: five scenarios, each re-time figured; the
    busy quiet one paused the busy children, the loud ones paused nobody, and two quiet re-times at once paused each
    other."""
    out = tmp_path / "quiet"
    assert quiet_timing.main(["--repeats", "2", "--load", "1", "--parallel", "2", "--rounds", "2",
                              "--timing-runs", "8", "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    rows = {row["scenario"]: row for row in data["rows"]}
    assert list(rows) == ["alone", "busy, loud", "busy, quiet", "2 at once, loud", "2 at once, quiet"]
    assert all(row["failed"] == 0 and row["re-times"] == 2 and row["speed-up"] > 0 for row in rows.values()), rows
    paused = {s["scenario"]: [r["most_paused"] for r in s["runs"]] for s in data["scenarios"]}
    assert min(paused["busy, quiet"]) >= 1, paused
    assert max(paused["alone"] + paused["busy, loud"] + paused["2 at once, loud"]) == 0, paused
    assert max(paused["2 at once, quiet"]) >= 1, paused
    assert "| alone |" in out.with_suffix(".md").read_text()


def test_a_problem_file_is_re_timed_against_itself_unless_a_candidate_is_named(tmp_path: Path) -> None:
    problem = Path("benchmarks/problems/kb_l2/gemm_relu_divide.py")
    reference, candidate = quiet_timing.pair(str(problem), None)
    assert reference == problem.read_text() and candidate.startswith(reference)
    assert candidate.rstrip().endswith("ModelNew = Model")
    named = tmp_path / "cand.py"
    named.write_text("class ModelNew: ...\n")
    assert quiet_timing.pair(str(problem), str(named)) == (reference, named.read_text())
    assert quiet_timing.pair(None, None) == (quiet_timing.PROBLEM, quiet_timing.CANDIDATE)
