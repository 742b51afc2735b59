"""The kernel language a run writes when none is asked for: the rules team writes Triton on a GPU (its kernels
build in seconds), the LLM teams CUDA C++; everyone writes C++ on the CPU. CLI and service agree."""

from __future__ import annotations

import pytest

from search.teams import TEAM_NAMES, default_target


@pytest.mark.parametrize("team", TEAM_NAMES)
def test_every_team_writes_cpp_on_the_cpu(team: str) -> None:
    assert default_target(team, "cpu") == "cpp"


def test_on_a_gpu_rules_write_triton_and_llm_teams_cuda() -> None:
    assert default_target("rules", "cuda") == "triton" and default_target("rules", "cuda:1") == "triton"
    assert default_target("stark", "cuda") == "cuda" and default_target("sampling", "cuda:0") == "cuda"


def test_the_service_fills_in_the_same_default(monkeypatch) -> None:
    from stark_web.studio.service.settings import parse_run_settings

    monkeypatch.setenv("STARK_LLM_BASE_URLS", "http://127.0.0.1:9/v1")  # the operator's allow-list (docs/llm.md)

    assert parse_run_settings({"team": "rules", "device": "cuda"}).target == "triton"
    stark = {"team": "stark", "device": "cuda", "provider": "openai-compatible", "base_url": "http://127.0.0.1:9/v1",
             "model": "m"}
    assert parse_run_settings(stark).target == "cuda"
    assert parse_run_settings({"team": "rules", "device": "cuda", "target": "cuda"}).target == "cuda"
