"""A Triton candidate on CPU through Triton's interpreter (TRITON_INTERPRET=1): built, judged and seen as custom."""

from __future__ import annotations

import pytest

from kernels import EvalSettings, evaluate
from tests.kernels.conftest import FIXTURES, fixture_source

pytestmark = pytest.mark.slow  # a harness evaluation: children


def test_a_triton_kernel_passes_under_the_interpreter(warm_settings: EvalSettings,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    result = evaluate(fixture_source("problem_scale_add"), (FIXTURES / "gpu" / "triton_scale_add.py").read_text(),
                      warm_settings.replace(seed=5))  # warm: not an isolation test
    assert result.verdict == "pass", (result.reasons, result.logs)
    assert result.check("no_custom_kernel")["detail"] == "custom work: triton kernel launch"
