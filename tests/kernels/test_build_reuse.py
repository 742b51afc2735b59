"""What a candidate's kept torch extension builds are keyed by, which verdicts keep them, and how a result says a
child reused them (kernels.parent.build_reuse)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels.parent import build_reuse, compile_seed
from kernels.parent.report import evaluation_report

PROBLEM, CANDIDATE = "problem source", "candidate source with load_inline"


def test_a_candidates_seed_is_keyed_by_its_build_environment_and_compiler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = compile_seed.seed_dir(tmp_path, PROBLEM, "cpu", CANDIDATE)
    assert compile_seed.seed_dir(tmp_path, PROBLEM, "cpu", CANDIDATE) == before  # stable
    monkeypatch.setenv("CXXFLAGS", "-O0")
    flagged = compile_seed.seed_dir(tmp_path, PROBLEM, "cpu", CANDIDATE)
    assert flagged != before
    monkeypatch.setenv("CXX", str(tmp_path / "another-compiler"))  # a compiler that is not there: its own key
    assert build_reuse.compiler_identity(str(tmp_path / "another-compiler")) == "none"
    assert compile_seed.seed_dir(tmp_path, PROBLEM, "cpu", CANDIDATE) not in (before, flagged)
    assert compile_seed.seed_dir(tmp_path, PROBLEM, "cpu", CANDIDATE + " ") != compile_seed.seed_dir(
        tmp_path, PROBLEM, "cpu", CANDIDATE)  # another source, another seed
    assert compile_seed.seed_dir(tmp_path, PROBLEM, "cpu") == compile_seed.seed_dir(tmp_path, PROBLEM, "cpu")


def test_builds_are_kept_after_a_verdict_reached_past_the_build() -> None:
    assert build_reuse.kept_after("pass", True) == "all"
    assert build_reuse.kept_after("incorrect", True) == "builds"
    assert build_reuse.kept_after("rejected", True) == "builds"
    assert build_reuse.kept_after("incorrect", False) is None  # no result reported: it never got past its build
    for verdict in ("build_error", "runtime_error", "timeout", "crash"):
        assert build_reuse.kept_after(verdict, True) is None


def test_only_the_torch_extension_builds_are_kept_after_a_non_pass(tmp_path: Path) -> None:
    work = tmp_path / "work" / "0123456789abcdef0123"
    for kind in compile_seed.KEPT:
        (work / "cache" / kind / "entry").mkdir(parents=True)
        (work / "cache" / kind / "entry" / "file").write_bytes(kind.encode())
    root = tmp_path / "root"
    added = compile_seed.keep(work, root, PROBLEM, "cpu", CANDIDATE, ("torch_extensions",))
    assert added == 1
    seed = compile_seed.seed_dir(root, PROBLEM, "cpu", CANDIDATE)
    assert [p.name for p in seed.iterdir() if p.is_dir()] == ["torch_extensions"]
    child = tmp_path / "work" / "fedcba9876543210fedc"
    (child / "cache" / "torch_extensions").mkdir(parents=True)
    assert compile_seed.plant(child, root, PROBLEM, "cpu", candidate_source=CANDIDATE) == 1
    assert build_reuse.planted_builds(child) == 1
    assert build_reuse.planted_builds(tmp_path / "nowhere") == 0
    assert compile_seed.discard(root, PROBLEM, "cpu", CANDIDATE) and not seed.exists()  # a child failed with it
    assert not compile_seed.discard(root, PROBLEM, "cpu", CANDIDATE)


def test_a_build_that_was_reused_says_so_in_the_phases_and_the_report() -> None:
    phases = [{"phase": "start", "seconds": 1.0}, {"phase": "build", "seconds": 0.2}]
    build_reuse.mark_build_phase(phases, build_reuse.reported_builds({"built": 0, "reused": 2}))
    assert phases[1] == {"phase": "build", "seconds": 0.2, "reused_builds": 2}
    built = [{"phase": "build", "seconds": 30.0}]
    build_reuse.mark_build_phase(built, {"built": 1, "reused": 1})
    assert "reused_builds" not in built[0]  # it built something itself: a real build time
    assert build_reuse.reported_builds({"built": "x"}) is None
    assert build_reuse.build_line({"built": 0, "reused": 1}).startswith("build: reused")
    assert build_reuse.build_line({"built": 1, "reused": 0}) == "build: 1 torch extension(s) built"
    assert build_reuse.build_line(None) is None
    report = evaluation_report({"verdict": "pass", "reasons": [], "flags": [], "integrity": [], "wall_s": 3.0,
                                "environment": {"extension_builds": {"built": 0, "reused": 1}}})
    assert "build: reused (1 torch extension(s)" in report
