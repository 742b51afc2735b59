"""Refused temperatures through `python -m search run` (real SDKs, engine and evaluator) against a stub model that takes
code's 0.1 but refuses plan's 0.8: the summary says which role ran without its temperature, a resumed run does not
ask again, and --strict-temperatures stops the run with the model, the role and the fix, re-sending nothing."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from search.cli import main
from tests.llm.stub_server import StubLLMServer

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = Path(__file__).parent / "fixtures" / "tiny_relu.py"
KEY = "sk-temperature-test-key-4242"
PROVIDERS = ["openai-compatible", "anthropic"]
# harness children forked from a warm zygote (no bubblewrap): the subject is the run against the provider
WARM = ["--sandbox", "none"]


def search_run(stub: StubLLMServer, provider: str, *flags: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_", "STARK_"))}
    env.update({"TEMP_TEST_KEY": KEY, "PYTHONUNBUFFERED": "1"})
    return subprocess.run(
        [sys.executable, "-m", "search", "run", str(PROBLEM), "--team", "stark", "--provider", provider,
         "--base-url", stub.url, "--api-key-env", "TEMP_TEST_KEY", "--model", "m-notemp", "--device", "cpu",
         "--timing-runs", "3", "--no-compile-baseline", *WARM, *flags],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )


def temperatures(stub: StubLLMServer, role: str, since: int = 0) -> list[float | None]:
    marker = {"plan": "the PLAN agent", "code": "the CODE agent"}[role]
    return [r.temperature for r in stub.requests[since:] if marker in r.text]


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_plan_runs_without_its_temperature_code_keeps_its_own_and_the_summary_says_so(
        stub: StubLLMServer, tmp_path: Path, provider: str) -> None:
    stub.reject_temperature = lambda t: t > 0.5
    out = tmp_path / "tree.json"
    proc = search_run(stub, provider, "--budget", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert temperatures(stub, "plan") == [0.8, None, None]  # refused once, then left out for the plan role only
    assert set(temperatures(stub, "code")) == {0.1}
    assert ("Temperature: plan ran without its temperature 0.8: m-notemp rejects temperature (2 call(s), "
            "nodes #1, #2).") in proc.stdout
    assert "code ran without" not in proc.stdout
    calls = [c for n in json.loads(out.read_text())["nodes"] for c in n["usage"]["calls"]]
    plan = [c for c in calls if c["role"] == "plan"]
    assert [(c["temperature"], c["temperature_requested"], c["temperature_dropped"]) for c in plan] == [
        (None, 0.8, "refused")] * 2
    assert "rejected temperature 0.8 for the plan agent" in plan[0]["temperature_note"]
    shown = io.StringIO()
    assert main(["show", str(out)], out=shown) == 0
    nodes = [line for line in shown.getvalue().splitlines() if line.lstrip().startswith("#")]  # below the verdict line
    assert ["no temp" in line for line in nodes] == [False, True, True]
    # Resumed: the plan role's refusal is on record, so its first call of the new process sends none.
    sent = len(stub.requests)
    proc = search_run(stub, provider, "--budget", "3", "--out", str(out), "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert temperatures(stub, "plan", sent) == [None] and set(temperatures(stub, "code", sent)) == {0.1}
    assert "plan ran without its temperature 0.8: m-notemp rejects temperature (3 call(s), nodes #1, #2, #3)" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_strict_temperatures_stop_the_run_naming_the_model_the_role_and_the_fix(
        stub: StubLLMServer, tmp_path: Path, provider: str) -> None:
    stub.reject_temperature = lambda t: t > 0.5
    out = tmp_path / "tree.json"
    proc = search_run(stub, provider, "--budget", "3", "--strict-temperatures", "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "run failed: agent error: m-notemp" in proc.stdout
    assert "refused the plan agent's temperature 0.8" in proc.stdout
    assert "drop --strict-temperatures" in proc.stdout and "--plan-model" in proc.stdout
    assert [r.temperature for r in stub.requests] == [0.8]  # nothing re-sent without it
    tree = json.loads(out.read_text())
    assert [n["verdict"] for n in tree["nodes"]] == ["pass", "agent_error"]
    assert tree["settings"]["team_options"]["strict_temperatures"] is True
