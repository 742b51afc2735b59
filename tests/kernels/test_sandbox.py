"""Isolation: secrets stripped from the environment; with bubblewrap, no network, read-only FS, hidden references."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent.isolation.sandbox import bwrap_available, clean_env
from tests.kernels.conftest import fixture_source


def test_it_strips_secrets_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GITHUB_TOKEN", "DJANGO_SECRET_KEY", "DB_PASSWORD",
                 "DATABASE_URL", "AWS_ACCESS_KEY_ID"):
        monkeypatch.setenv(name, "secret-value")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    env = clean_env({"TORCH_EXTENSIONS_DIR": "/x"})
    assert "secret-value" not in env.values()
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["TORCH_EXTENSIONS_DIR"] == "/x"


@pytest.mark.slow
def test_a_candidate_sees_no_secrets_and_cannot_escape(fast_settings: EvalSettings, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-not-leak")
    target = tmp_path / "escaped.txt"
    monkeypatch.setenv("STARK_PROBE_WRITE", str(target))
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("env_probe"), fast_settings)
    assert result.verdict == "pass", result.reasons
    log = result.logs["build"]
    assert "SECRETS-SEEN: none" in log, log
    assert "should-not-leak" not in log
    if not bwrap_available(cuda=False):
        pytest.skip("bubblewrap does not work on this host; only the environment is isolated")
    assert result.environment["sandbox"] == "bwrap"
    assert "NETWORK: blocked" in log
    assert "WRITE-OUTSIDE: denied" in log and not target.exists()
    assert "REFERENCE-FILES: 0" in log


@pytest.mark.slow
def test_sandbox_none_still_runs_candidates(fast_settings: EvalSettings) -> None:
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"),
                      fast_settings.replace(sandbox="none"))
    assert result.verdict == "pass" and result.environment["sandbox"] == "none"
