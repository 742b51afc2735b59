from __future__ import annotations

from pathlib import Path

from benchmarks import quiet_timing


def test_a_problem_file_is_re_timed_against_itself_unless_a_candidate_is_named(tmp_path: Path) -> None:
    problem = Path("benchmarks/problems/kb_l2/gemm_relu_divide.py")
    reference, candidate = quiet_timing.pair(str(problem), None)
    assert reference == problem.read_text() and candidate.startswith(reference)
    assert candidate.rstrip().endswith("ModelNew = Model")
    named = tmp_path / "cand.py"
    named.write_text("class ModelNew: ...\n")
    assert quiet_timing.pair(str(problem), str(named)) == (reference, named.read_text())
    assert quiet_timing.pair(None, None) == (quiet_timing.PROBLEM, quiet_timing.CANDIDATE)
