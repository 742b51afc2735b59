"""The reference's fuzzing worker, stopped once by its deadline (as on a busy host), is started once more: the
candidate is still judged on every variant, not passed unfuzzed."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate

pytestmark = pytest.mark.slow  # harness evaluations: children

# Hangs the first time the fuzzing stage's reference worker calls it, leaving a marker so that the next worker
# runs normally.
PROBLEM = '''
import os, sys, time
import torch
import torch.nn as nn

MARKER = {marker!r}


def in_fuzzing_worker():
    frame = sys._getframe()
    while frame is not None:
        if (frame.f_globals.get("__name__") == "kernels.child.fuzz_variants"
                and frame.f_code.co_name == "reference_variant"):  # not the candidate's child, which runs beside it
            return True
        frame = frame.f_back
    return False


class Model(nn.Module):
    def forward(self, x):
        if in_fuzzing_worker() and not os.path.exists(MARKER):
            open(MARKER, "w").close()
            time.sleep(600)
        return torch.relu(x) * 2.0


batch = 8
dim = 64


def get_inputs():
    return [torch.randn(batch, dim)]


def get_init_inputs():
    return []
'''


CANDIDATE = """

class ModelNew(nn.Module):
    def forward(self, x):
        return torch.clamp_min(x, 0.0) * 2.0
"""


def test_a_fuzzing_worker_stopped_by_its_deadline_is_started_once_more(tmp_path: Path,
                                                                         warm_settings: EvalSettings) -> None:
    marker = tmp_path / "hung-once"
    problem = PROBLEM.format(marker=str(marker))
    settings = warm_settings.replace(cache_dir=str(tmp_path / "cache"), fuzz="standard", run_timeout_s=6,
                                     reuse_results=False)
    result = evaluate(problem, problem + CANDIDATE, settings)
    assert marker.exists(), (result.verdict, result.reasons, result.fuzz)  # the first worker met a fuzzed shape
    fuzz = result.fuzz or {}
    assert result.verdict == "pass", result.reasons
    assert not fuzz.get("note") and fuzz["run"] >= 5 and not fuzz["failed"], fuzz
