"""inspect_problem: the summary of a good problem, and a clear ProblemError for every kind of bad one."""

from __future__ import annotations

import pytest

from kernels import EvalSettings, ProblemError, inspect_problem, reference_candidate
from tests.kernels.conftest import fixture_source

GOOD_TAIL = '''

def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return []
'''
HEAD = "import torch\nimport torch.nn as nn\n\n\n"
PLAIN_MODEL = "class Model(nn.Module):\n    def forward(self, x):\n        return x * 2\n"


@pytest.mark.slow
def test_it_summarizes_a_problem(warm_settings: EvalSettings) -> None:
    summary = inspect_problem(fixture_source("problem_scale_add"), "cpu", warm_settings)
    assert summary.inputs == [{"shape": [64, 256], "dtype": "float32"}]
    assert summary.outputs == [{"shape": [64, 256], "dtype": "float32"}]
    assert summary.parameters == 512
    assert summary.bytes == (64 * 256 * 2 + 512) * 4
    assert {"mul", "add", "relu"} <= set(summary.ops)


@pytest.mark.slow
def test_it_counts_flops_of_a_matmul(warm_settings: EvalSettings) -> None:
    source = HEAD + "class Model(nn.Module):\n    def forward(self, a, b):\n        return a @ b\n" + \
        "\n\ndef get_inputs():\n    return [torch.randn(32, 64), torch.randn(64, 16)]\n\n\ndef get_init_inputs():\n    return []\n"
    summary = inspect_problem(source, "cpu", warm_settings)
    assert summary.flops == 2 * 32 * 64 * 16
    assert summary.arithmetic_intensity > 0


@pytest.mark.parametrize("source, words", [
    ("def broken(:\n", ["does not parse", "line 1"]),
    (HEAD + PLAIN_MODEL + "\n\ndef get_inputs():\n    return []\n", ["get_init_inputs"]),
    (HEAD + "def get_inputs():\n    return []\n\n\ndef get_init_inputs():\n    return []\n", ["class Model"]),
])
def test_it_rejects_static_problems_without_running_them(source: str, words: list[str],
                                                          warm_settings: EvalSettings) -> None:
    with pytest.raises(ProblemError) as info:
        inspect_problem(source, "cpu", warm_settings)
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("source, words", [
    (HEAD + "raise ImportError('needs apex')\n" + PLAIN_MODEL + GOOD_TAIL, ["importing the problem", "needs apex"]),
    (HEAD + "class Model(nn.Module):\n    def forward(self, x):\n        return x @ x\n" + GOOD_TAIL,
     ["Model.forward raised", "fix forward()"]),
    (HEAD + "class Model(nn.Module):\n    def __init__(self, n):\n        super().__init__()\n"
     "    def forward(self, x):\n        return x\n" + GOOD_TAIL.replace("return []\n", "return [1, 2]\n", 2)
     .replace("[torch.randn(4, 8)]", "[torch.randn(4, 8)]"), ["Model(*get_init_inputs())"]),
    (HEAD + PLAIN_MODEL + GOOD_TAIL.replace("[torch.randn(4, 8)]", "torch.randn(4) / 0"), ["get_inputs"]),
    (HEAD + "class Model(nn.Module):\n    def forward(self, x):\n        return x.log() * 0 - 1 / x.abs().clamp_max(0)\n"
     + GOOD_TAIL, ["NaN/Inf"]),
])
@pytest.mark.slow
def test_it_names_runtime_problem_errors(source: str, words: list[str], warm_settings: EvalSettings) -> None:
    with pytest.raises(ProblemError) as info:
        inspect_problem(source, "cpu", warm_settings)
    for word in words:
        assert word in str(info.value), str(info.value)


@pytest.mark.slow
def test_it_bounds_a_problem_that_hangs_at_import(fast_settings: EvalSettings) -> None:
    source = HEAD + "import time\ntime.sleep(600)\n" + PLAIN_MODEL + GOOD_TAIL
    with pytest.raises(ProblemError, match="did not finish"):
        inspect_problem(source, "cpu", fast_settings.replace(build_timeout_s=4))


@pytest.mark.slow
def test_it_reports_a_problem_that_needs_too_much_memory(fast_settings: EvalSettings) -> None:
    source = HEAD + PLAIN_MODEL + GOOD_TAIL.replace("[torch.randn(4, 8)]", "[torch.ones(6 * 1024**3 // 4)]")
    with pytest.raises(ProblemError, match="memory"):
        inspect_problem(source, "cpu", fast_settings.replace(memory_limit_mb=512))


def test_reference_candidate_defines_model_new() -> None:
    source = reference_candidate(fixture_source("problem_scale_add"))
    namespace: dict = {}
    exec(compile(source, "candidate", "exec"), namespace)
    assert issubclass(namespace["ModelNew"], namespace["Model"])
