"""CPU smoke runs of the questions that time on a device, through `python -m benchmarks QUESTION`, at their smallest
sizes: each writes its report and its figures are present and sane. (The file readers are run in test_cli.py; the
questions with their own test file are tested there.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # harness children and the Triton interpreter


def bench(*args: str, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "benchmarks", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
    return done


def test_retime_self_times_a_problem_against_itself(tmp_path: Path) -> None:
    out = tmp_path / "retime.json"
    bench("retime-self", "--device", "cpu", "--rounds", "2", "--out", str(out),
          "tests/kernels/fixtures/problem_scale_add.py")
    rows = json.loads(out.read_text())["rows"]
    assert [row["problem"] for row in rows] == ["problem_scale_add"]
    assert rows[0]["reference_ms"] > 0 and rows[0]["candidate_ms"] > 0 and rows[0]["ratio"] > 0


def test_gemm_epilogue_runs_its_candidates_in_the_triton_interpreter(tmp_path: Path) -> None:
    bench("gemm-epilogue", "--device", "cpu", "--quick", "--no-compile", "--only", "gemm_relu_scale_add",
          "--out", str(tmp_path))
    (row,) = json.loads((tmp_path / "cpu.json").read_text())["rows"]
    variants = row["variants"]
    assert {"eager", "fuse-all (triton)", "gemm=triton"} <= set(variants)
    wrong = {name: v.get("error") for name, v in variants.items() if not v.get("correct") or not v.get("median_ms")}
    assert not wrong, wrong


def test_rules_rewrites_renders_and_times_every_rewrite_problem_correct(tmp_path: Path) -> None:
    rendered = tmp_path / "rendered"
    bench("rules-rewrites", "render", str(rendered), "--cpu-sizes")
    problems = {p.stem for p in (ROOT / "benchmarks/problems/rewrites").glob("*.py")}
    assert problems and problems <= {p.stem for p in rendered.glob("*.src")}
    bench("rules-rewrites", "time", str(rendered), "--device", "cpu", "--runs", "3", "--rounds", "1",
          "--json", str(tmp_path / "time.json"))
    rows = json.loads((tmp_path / "time.json").read_text())["rows"]
    assert rows and all(row["correct"] for row in rows), [row for row in rows if not row["correct"]]
