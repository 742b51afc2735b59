"""The reference's fuzzing records are made once per problem: a search's root (the reference itself) runs no variant
and makes none, and the first attempts judged at the same time share one reference worker."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate, reference_candidate
from kernels.parent.fuzz import ITSELF
from tests.kernels.conftest import fixture_source

pytestmark = pytest.mark.slow  # harness evaluations: children


def test_the_root_runs_no_variant_and_attempts_judged_together_share_one_reference_worker(
        tmp_path: Path, warm_settings: EvalSettings) -> None:
    problem = fixture_source("problem_scale_add")
    settings = warm_settings.replace(cache_dir=str(tmp_path / "cache"), fuzz="standard", reuse_results=False)
    root = evaluate(problem, reference_candidate(problem), settings)
    assert root.verdict == "pass", root.reasons
    assert root.fuzz is not None and root.fuzz["run"] == 0 and root.fuzz["skipped"]
    assert all(s["why"] == ITSELF for s in root.fuzz["skipped"]), root.fuzz["skipped"]
    assert not list((tmp_path / "cache" / "fuzz").glob("*.pt"))  # no worker ran for it

    results: dict[str, EvalResult] = {}

    def judge(name: str) -> None:
        results[name] = evaluate(problem, fixture_source(name), settings)

    threads = [threading.Thread(target=judge, args=(name,)) for name in ("honest_torch", "same_ops")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert all(r.verdict == "pass" for r in results.values()), [r.reasons for r in results.values()]
    fuzzed = [r.fuzz for r in results.values()]
    assert all(f["run"] > 0 and f["run"] == fuzzed[0]["run"] and not f["failed"] for f in fuzzed), fuzzed
    # one made the records, the other waited for that worker and read them
    assert sorted(f["reference_cached"] for f in fuzzed) == [False, True], fuzzed
    assert len(list((tmp_path / "cache" / "fuzz").glob("*.pt"))) == 1
