"""Timing protocol, roofline arithmetic, the beyond-roofline flag end to end, and cached baselines."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch

from kernels import EvalSettings, evaluate
from kernels.child.timing import summarize, time_callable
from kernels.parent.reference import ensure_reference
from kernels.parent.roofline import assess, ceilings_stale
from tests.kernels.conftest import fixture_source


def test_it_summarizes_timings() -> None:
    stats = summarize([4.0, 1.0, 3.0, 2.0, 5.0], warmup=2)
    assert stats["median_ms"] == 3.0 and stats["min_ms"] == 1.0 and stats["mean_ms"] == 3.0
    assert stats["iqr_ms"] == pytest.approx(3.0) and stats["runs"] == 5 and stats["warmup"] == 2


def test_it_times_cpu_work_with_the_monotonic_clock() -> None:
    calls = []

    def work() -> int:
        calls.append(1)
        time.sleep(0.002)
        return len(calls)

    stats, times, last = time_callable(work, torch.device("cpu"), runs=10, warmup=3, flush=True)
    assert len(calls) == 13 and last == 13 and len(times) == 10
    assert 2.0 <= stats["min_ms"] <= stats["median_ms"] < 50.0


def test_it_places_a_time_against_the_roofline() -> None:
    ceilings = {"copy_gbps": 100.0, "matmul_tflops": {"float32": 1.0}}
    figures, beyond = assess(flops=5e8, moved_bytes=1e8, ms=2.0, ceilings=ceilings)
    assert figures["bound"] == "memory"  # 1 ms moving 1e8 bytes at 100 GB/s vs 0.5 ms of compute at 1 TFLOP/s
    assert figures["achieved_gbps"] == pytest.approx(50.0)
    assert figures["pct_of_peak"] == pytest.approx(50.0)
    assert not beyond
    _, beyond = assess(flops=5e8, moved_bytes=1e8, ms=0.5, ceilings=ceilings)
    assert beyond
    figures, _ = assess(flops=4e9, moved_bytes=1e6, ms=8.0, ceilings=ceilings)
    assert figures["bound"] == "compute" and figures["pct_of_peak"] == pytest.approx(50.0)


@pytest.mark.slow
def test_it_flags_a_speed_past_the_roofline(fast_settings: EvalSettings) -> None:
    settings = fast_settings.replace(roofline=True, timing_runs=10)
    problem = fixture_source("problem_broadcast")
    cheat = evaluate(problem, fixture_source("broadcast_view"), settings)
    assert cheat.verdict == "pass", cheat.reasons
    assert "beyond_roofline" in cheat.flags, (cheat.roofline, cheat.timing)
    assert cheat.roofline["bound"] == "memory" and cheat.roofline["pct_of_peak"] > 125
    honest = evaluate(problem, fixture_source("broadcast_honest"), settings)
    assert honest.verdict == "pass", honest.reasons
    assert "beyond_roofline" not in honest.flags, (honest.roofline, honest.timing)
    assert honest.check("beyond_roofline")["status"] == "pass"


@pytest.mark.slow
def test_it_caches_baselines_per_problem_and_device(fast_settings: EvalSettings) -> None:
    problem = fixture_source("problem_scale_add")
    settings = fast_settings.replace(timing_runs=7)
    first, _ = ensure_reference(problem, settings, baselines=("eager",), outputs=False)
    started = time.monotonic()
    again, _ = ensure_reference(problem, settings, baselines=("eager",), outputs=False)
    assert time.monotonic() - started < 1.0  # no worker was started
    assert first.baselines["eager"]["ms"] == again.baselines["eager"]["ms"] > 0
    assert first.baselines["eager"]["timing"]["runs"] == 7


@pytest.mark.slow
def test_the_reference_worker_measures_the_ceilings_after_its_baselines(fast_settings: EvalSettings,
                                                                        tmp_path: Path) -> None:
    """The ceilings' TF32 matmul leaves cuBLAS's fp32_precision "ieee" where it was "none" (same numerics), and that
    setting is in Inductor's FX graph cache key: measured before the torch.compile baselines, their compiled graphs
    would never match a candidate's and no compile seed would hit. So the baselines come first.
    Its own cache: the session's cache holds ceilings and baselines other tests measured, and nothing would be timed."""
    settings = fast_settings.replace(roofline=True, baselines=("eager",), timing_runs=5, cache_dir=str(tmp_path))
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("honest_torch"), settings)
    assert result.verdict == "pass", result.reasons
    phases = [p["phase"] for p in result.phases]
    assert "device ceilings" in phases and "baselines" in phases, phases
    assert phases.index("baselines") < phases.index("device ceilings"), phases


def test_float32_work_may_reach_the_tf32_rate_and_past_it_is_less_work() -> None:
    """cuDNN runs float32 convolutions on TF32 tensor cores by default: an H200 conv at 68 TFLOP/s beats the
    measured FP32 matmul rate (~50) honestly, so float32 is held to the TF32 ceiling; half precision keeps its own.
    Past the compute bound but not under the floor (the bytes read and written once), an attempt does less work than
    the reference's ops: said (`less_work`), not flagged."""
    ceilings = {"copy_gbps": 4000.0, "matmul_tflops": {"float32": 50.0, "tfloat32": 400.0, "bfloat16": 700.0},
                "device": "cuda"}
    figures, beyond = assess(flops=37.5e9, moved_bytes=2e8, ms=0.55, ceilings=ceilings)
    assert not beyond and figures["bound"] == "compute" and not figures.get("less_work")
    figures, beyond = assess(flops=37.5e9, moved_bytes=2e8, ms=0.06, ceilings=ceilings)  # 625 TFLOP/s: past TF32
    assert not beyond and figures["less_work"] and figures["pct_of_floor"] == pytest.approx(83.3, abs=0.1)
    figures, _ = assess(flops=37.5e9, moved_bytes=2e8, ms=0.55,
                        ceilings={**ceilings, "matmul_tflops": {"float32": 50.0}})
    assert figures["less_work"]  # without a TF32 figure the FP32 rate is the ceiling


def test_only_the_floor_of_inputs_and_outputs_is_implausible_to_beat() -> None:
    """A rewrite that folds the weights at init reads fewer bytes than the reference's minimum (inputs, parameters,
    outputs); only reading the inputs and writing the outputs once bounds every program."""
    ceilings = {"copy_gbps": 1000.0, "matmul_tflops": {"float32": 50.0}, "device": "cuda"}
    figures, beyond = assess(flops=0.0, moved_bytes=1e8, ms=0.05, ceilings=ceilings, floor_bytes=2e7)
    assert not beyond and figures["less_work"] and figures["pct_of_floor"] == pytest.approx(40.0)
    figures, beyond = assess(flops=0.0, moved_bytes=1e8, ms=0.01, ceilings=ceilings, floor_bytes=2e7)
    assert beyond and figures["pct_of_floor"] == pytest.approx(200.0)


def test_cuda_ceilings_without_the_tf32_rate_are_measured_again() -> None:
    import time

    fresh = {"measured_at": time.time(), "device": "cuda", "matmul_tflops": {"float32": 50.0}}
    assert ceilings_stale(fresh)
    assert not ceilings_stale({**fresh, "matmul_tflops": {"float32": 50.0, "tfloat32": 400.0}})
    assert not ceilings_stale({**fresh, "device": "cpu"})
