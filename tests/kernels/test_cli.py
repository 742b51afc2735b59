"""`python -m kernels`: the JSON contract (exactly one object on stdout), readable reports, exit codes 0 and 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kernels.conftest import FIXTURES
from tests.kernels.test_settings_and_result import RESULT_KEYS

pytestmark = pytest.mark.slow  # starts processes (workers, servers, harness children)

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = str(FIXTURES / "problem_scale_add.py")
FAST = ["--trials", "2", "--runs", "3", "--warmup", "1", "--baselines", "none", "--no-roofline"]


def cli(*args: str, cache: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kernels", *args, "--cache-dir", cache], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)


def test_evaluate_json_prints_exactly_one_object(kernel_cache: str) -> None:
    done = cli("evaluate", PROBLEM, str(FIXTURES / "candidates" / "forged_stdout.py"), "--json", *FAST, cache=kernel_cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # the candidate's own prints never reach stdout
    assert set(data) == RESULT_KEYS
    assert data["verdict"] == "incorrect"
    assert data["settings"]["correctness_trials"] == 2 and data["settings"]["baselines"] == []


def test_evaluate_prints_a_readable_report(kernel_cache: str) -> None:
    done = cli("evaluate", PROBLEM, str(FIXTURES / "candidates" / "honest_torch.py"), *FAST, cache=kernel_cache)
    assert done.returncode == 0, done.stderr
    assert "verdict: PASS" in done.stdout
    assert "integrity:" in done.stdout and "timing: median" in done.stdout


def test_an_invalid_problem_exits_2_with_a_message(kernel_cache: str, tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\ndef get_inputs():\n    return []\n")
    done = cli("evaluate", str(bad), str(FIXTURES / "candidates" / "honest_torch.py"), "--json", cache=kernel_cache)
    assert done.returncode == 2
    assert done.stdout == ""
    assert "invalid problem" in done.stderr and "class Model" in done.stderr


def test_bad_arguments_exit_2(kernel_cache: str) -> None:
    done = cli("evaluate", PROBLEM, PROBLEM, "--device", "tpu", cache=kernel_cache)
    assert done.returncode == 2 and "device 'tpu'" in done.stderr
    done = cli("evaluate", PROBLEM, "/nonexistent/candidate.py", cache=kernel_cache)
    assert done.returncode == 2 and "cannot read the candidate file" in done.stderr
    done = cli("evaluate", PROBLEM, PROBLEM, "--baselines", "turbo", cache=kernel_cache)
    assert done.returncode == 2 and "unknown baseline" in done.stderr


def test_inspect_prints_the_summary(kernel_cache: str) -> None:
    done = cli("inspect", PROBLEM, "--json", cache=kernel_cache)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["outputs"] == [{"shape": [64, 256], "dtype": "float32"}] and summary["parameters"] == 512
    text = cli("inspect", PROBLEM, cache=kernel_cache)
    assert "parameters:  512" in text.stdout


def test_baseline_times_the_reference(kernel_cache: str) -> None:
    done = cli("baseline", PROBLEM, "--baselines", "eager", "--runs", "4", "--json", cache=kernel_cache)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) == {"eager"} and data["eager"]["ms"] > 0 and data["eager"]["timing"]["runs"] == 4
