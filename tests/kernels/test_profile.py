"""Profiling feedback (kernels/shared/profile.py, kernels/parent/ncu.py): torch.profiler after timing in the real harness child,
FLOP rates where the profiler counts FLOPs, a deadline, failures that never change a verdict, and Nsight Compute
degrading with a note where it cannot run."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from kernels import EvalResult, EvalSettings, evaluate
from kernels.child.torch_profiler import plan_calls
from kernels.parent import ncu
from kernels.parent.report import evaluation_report
from kernels.shared.profile import summarize
from tests.kernels.conftest import fixture_source

SCALE_ADD = fixture_source("problem_scale_add")
UNDER_PROFILER = fixture_source("honest_torch").replace(  # the honest candidate, unless it is being profiled
    "        return torch.addcmul", "        if torch.autograd.profiler._is_profiler_enabled:\n            {action}\n"
    "        return torch.addcmul")


@pytest.fixture(scope="module")
def profiled(warm_settings: EvalSettings) -> Callable[..., EvalResult]:
    """Evaluations with the roofline on, memoized; warm (no bubblewrap): the subject is the profile, not isolation."""
    memo: dict[str, EvalResult] = {}

    def run(problem: str, candidate: str, **overrides: object) -> EvalResult:
        key = f"{problem[:40]}:{candidate}:{sorted(overrides.items())}"
        if key not in memo:
            memo[key] = evaluate(problem, candidate, warm_settings.replace(roofline=True, **overrides))
        return memo[key]

    return run


@pytest.mark.slow
def test_a_matmul_is_profiled_with_its_flop_rate_after_timing(profiled) -> None:
    result = profiled(fixture_source("problem_matmul"), fixture_source("plain_matmul"))
    assert result.verdict == "pass", result.reasons
    profile = result.profile
    assert profile["activity"] == "cpu" and profile["calls"] >= 1 and not profile["error"], profile
    rows = {k["name"]: k for k in profile["kernels"]}
    mm = rows.get("aten::mm") or rows.get("aten::matmul")
    assert mm is not None, rows
    assert mm["flops"] == pytest.approx(2 * 64**3, rel=0.01)  # FLOPs per forward, from the profiler
    assert mm["tflops"] > 0 and mm["pct_of_peak"] is not None and mm["pct_of_peak"] > 0
    assert profile["kernels"] == sorted(profile["kernels"], key=lambda k: -k["ms"])
    assert 0.99 <= sum(k["share"] for k in profile["kernels"]) + profile["other_ms"] / profile["forward_ms"] <= 1.01
    assert profile["bytes"] == 3 * 64 * 64 * 4 and profile["achieved_gbps"] > 0 and profile["pct_of_copy"] > 0
    phases = [p["phase"] for p in result.phases]
    assert phases.index("profiling") > phases.index("timing")  # never inside the timed loop
    assert "profile (CPU ops by self time" in evaluation_report(result.to_dict())
    assert EvalResult.from_dict(result.to_dict()).profile == profile  # stored with the result


@pytest.mark.slow
def test_an_elementwise_candidate_shows_its_ops_without_a_matmul_rate(profiled) -> None:
    result = profiled(SCALE_ADD, fixture_source("honest_torch"))
    assert result.verdict == "pass", result.reasons
    names = [k["name"] for k in result.profile["kernels"]]
    assert "aten::addcmul" in names and "aten::clamp_min" in names, names
    assert all(k["pct_of_peak"] is None for k in result.profile["kernels"])  # elementwise: no matmul ceiling
    assert result.profile["achieved_gbps"] > 0  # the whole forward's minimum bytes over its profiled time


@pytest.mark.slow
def test_the_reference_gets_a_profile_too_and_profiling_can_be_turned_off(profiled) -> None:
    from kernels import reference_candidate

    reference = profiled(SCALE_ADD, reference_candidate(SCALE_ADD))
    assert {"aten::mul", "aten::add", "aten::relu"} <= {k["name"] for k in reference.profile["kernels"]}
    off = profiled(SCALE_ADD, fixture_source("honest_torch"), profile=False)
    assert off.verdict == "pass" and off.profile is None
    assert "profiling" not in [p["phase"] for p in off.phases]


@pytest.mark.slow
def test_a_profile_that_would_exceed_its_deadline_is_skipped_with_a_note(profiled) -> None:
    result = profiled(SCALE_ADD, fixture_source("honest_torch"), profile_deadline_s=1e-9)
    assert result.verdict == "pass"
    assert result.profile["kernels"] == [] and "profile_deadline_s=1e-09" in result.profile["note"]


@pytest.mark.slow
@pytest.mark.parametrize("action, expected", [
    ("raise RuntimeError('no profiling here')", "profiling failed: RuntimeError: no profiling here"),
    ("import os; os._exit(3)", "exited with code 3 while profiled"),
])
def test_a_profiler_failure_never_fails_a_correct_candidate(profiled, action: str, expected: str) -> None:
    result = profiled(SCALE_ADD, UNDER_PROFILER.replace("{action}", action))
    assert result.verdict == "pass", result.reasons
    assert result.timing is not None and result.correctness["passed"] == result.correctness["trials"]
    assert expected in result.profile["error"], result.profile


@pytest.mark.slow
def test_outputs_rewritten_while_profiled_are_rejected(profiled) -> None:
    """The candidate's code runs again after its outputs were saved: rewriting them then is caught by their hash."""
    candidate = UNDER_PROFILER.replace("{action}", "open('outputs.pt', 'ab').write(b'later')")
    result = profiled(SCALE_ADD, candidate)
    assert result.verdict == "rejected", result.reasons
    assert "outputs file changed after the harness saved it" in result.reasons[0]


def test_the_number_of_profiled_calls_fits_the_deadline() -> None:
    assert plan_calls(1.0, 10.0) == (3, "")
    assert plan_calls(1000.0, 5.0)[0] == 1  # 3 s a profiled call: one fits
    calls, note = plan_calls(5000.0, 10.0)
    assert calls == 0 and "raise it" in note


def test_summarize_shares_rates_and_ceilings() -> None:
    raw = {"activity": "cuda", "calls": 2, "note": "", "wall_s": 0.5,
           "events": [{"name": "sm90_xmma_gemm_f32", "count": 2, "total_us": 3000.0, "flops": 2 * 2e12 * 1e-3 * 1.5},
                      {"name": "vectorized_elementwise_kernel", "count": 4, "total_us": 1000.0, "flops": 0.0}]}
    profile = summarize(raw, moved_bytes=8e6, ceilings={"copy_gbps": 4000.0, "matmul_tflops": {"float32": 40.0}})
    gemm, elementwise = profile["kernels"]
    assert profile["forward_ms"] == 2.0 and gemm["ms"] == 1.5 and gemm["share"] == 0.75 and elementwise["calls"] == 2
    assert gemm["tflops"] == pytest.approx(2.0) and gemm["pct_of_peak"] == pytest.approx(5.0)
    assert elementwise["tflops"] is None
    assert profile["achieved_gbps"] == pytest.approx(4.0) and profile["pct_of_copy"] == pytest.approx(0.1)


# -- Nsight Compute ---------------------------------------------------------------------------------------------

RAW_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3.12)
==PROF== Profiling "vectorized_elementwise_kernel" - 0: 0%....50%....100% - 9 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__throughput.avg.pct_of_peak_sustained_elapsed","gpu__time_duration.sum","sm__throughput.avg.pct_of_peak_sustained_elapsed","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","","","","","","","","","%","nsecond","%","%"
"0","4242","python3.12","host","void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int, T2, T3)","1","7","(128, 1, 1)","(1024, 1, 1)","0","9.0","88.61","12,736","21.30","79.12"
"1","4242","python3.12","host","scale_add_relu_kernel(const float *, float *, int)","1","7","(256, 1, 1)","(512, 1, 1)","0","9.0","91.20","25,120","18.70","85.50"
==PROF== Disconnected from process 4242
'''


def test_ncu_raw_csv_is_read_per_kernel_in_microseconds() -> None:
    kernels = ncu.parse(RAW_CSV)
    assert [k["name"][:21] for k in kernels] == ["scale_add_relu_kernel", "void at::native::vect"]  # longest first
    assert kernels[0] == {"name": "scale_add_relu_kernel(const float *, float *, int)", "duration_us": 25.12,
                          "dram_pct": 91.2, "sm_pct": 18.7, "occupancy_pct": 85.5}
    assert ncu.parse("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission") == []


@pytest.fixture
def fresh_probe() -> Iterator[None]:
    saved = dict(ncu._state)
    ncu._state.clear()
    yield
    ncu._state.clear()
    ncu._state.update(saved)


def test_ncu_missing_from_path_gives_a_note(fresh_probe, monkeypatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    path, note = ncu.probe()
    assert path is None and "not on PATH" in note and "install" in note
    settings = EvalSettings(device="cuda")
    result = ncu.measure({}, settings, Path("/nonexistent"), lambda *a: pytest.fail("no child without ncu"))
    assert result["kernels"] == [] and "not on PATH" in result["note"]
    assert "CPU device" in ncu.measure({}, EvalSettings(), Path("/nonexistent"), lambda *a: None)["note"]


@pytest.fixture
def refusing_ncu(monkeypatch, fresh_probe) -> Iterator[Path]:
    """An `ncu` on PATH that answers --version and, like a driver that restricts the counters, refuses to profile
    (what the real one prints then); readable by the sandbox user (not under pytest's 0700 tmp dirs)."""
    folder = Path(tempfile.mkdtemp(prefix="stark-fake-ncu-"))
    folder.chmod(0o755)
    script = folder / "ncu"
    script.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'NVIDIA (R) Nsight Compute 2025.1'; exit 0; }\n"
                      "echo '==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
                      "Performance Counters on the target device 0.'\nexit 1\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH | stat.S_IRGRP | stat.S_IROTH)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    yield script
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_ncu_without_permission_degrades_with_a_note_and_is_not_tried_again(refusing_ncu, kernel_cache) -> None:
    from kernels.parent.evaluate import run_candidate_child
    from kernels.parent.phases import PhaseClock

    settings = EvalSettings(device="cuda", cache_dir=kernel_cache, sandbox="none", warm_start=False)
    calls: list[list[str]] = []

    def child(task, work_dir, wrap):
        calls.append(wrap)
        return run_candidate_child(task, work_dir, settings, Path(kernel_cache), PhaseClock(), wrap)

    task = {"problem_source": SCALE_ADD, "candidate_source": fixture_source("honest_torch"), "device": "cuda",
            "seed": 0, "seeds": [1, 2], "memory_limit_mb": 4096, "timing": {"runs": 1, "warmup": 0, "flush": False}}
    result = ncu.measure(task, settings, Path(kernel_cache), child)
    assert result["kernels"] == [] and "ERR_NVGPUCTRPERM" in result["note"] and "NVreg_Restrict" in result["note"]
    assert calls and calls[0][0] == str(refusing_ncu) and "--metrics" in calls[0]
    again = ncu.measure(task, settings, Path(kernel_cache), child)
    assert again["note"] == result["note"] and len(calls) == 1  # remembered: no second child


# -- on a CUDA device (the lead runs `pytest -m gpu` on the H200; skipped cleanly without CUDA) -------------------

GPU = Path(__file__).parent / "fixtures" / "gpu"


@pytest.mark.gpu
@pytest.mark.parametrize("problem, candidate, kernel", [  # (a C++/CUDA extension's own kernel: gpu_checks, 50 s build)
    ("problem_gpu_scale_add", "triton_scale_add", "scale_add_relu_kernel"),
    ("problem_gpu_matmul", None, ""),
])
def test_cuda_kernels_appear_in_the_profile(problem: str, candidate: str | None, kernel: str, kernel_cache) -> None:
    from kernels import reference_candidate

    source = (GPU / f"{problem}.py").read_text()
    settings = EvalSettings(device="cuda", cache_dir=kernel_cache, baselines=(), build_timeout_s=600, timing_runs=20)
    result = evaluate(source, (GPU / f"{candidate}.py").read_text() if candidate else reference_candidate(source),
                      settings)
    assert result.verdict == "pass", result.reasons
    profile = result.profile
    assert profile["activity"] == "cuda" and profile["calls"] >= 1 and not profile["error"], profile
    names = [k["name"] for k in profile["kernels"]]
    if kernel:
        assert any(kernel in name for name in names), names  # the candidate's own kernel, by device time
        assert profile["achieved_gbps"] > 0 and profile["pct_of_copy"] is not None
    else:  # a matmul: its kernels carry the FLOPs of the op that launched them
        rated = [k for k in profile["kernels"] if k["tflops"]]
        assert rated and rated[0]["pct_of_peak"] is not None and rated[0]["tflops"] > 1, profile["kernels"]
    # ms per forward from the profiler agrees with the timed median within the profiler's own overhead
    assert 0.05 < profile["forward_ms"] / result.timing["median_ms"] < 2.0, (profile["forward_ms"], result.timing)

    assert profile["wall_s"] < 3.0, profile["wall_s"]  # the cost per evaluation (CUPTI start-up included)


@pytest.mark.gpu
def test_ncu_measures_the_kernels_or_says_why_not(kernel_cache, capsys) -> None:
    source = (GPU / "problem_gpu_scale_add.py").read_text()
    settings = EvalSettings(device="cuda", cache_dir=kernel_cache, baselines=(), build_timeout_s=600, timing_runs=20,
                            ncu=True)
    result = evaluate(source, (GPU / "triton_scale_add.py").read_text(), settings)
    assert result.verdict == "pass", result.reasons
    measured = result.profile["ncu"]
    with capsys.disabled():
        print("\nncu:", measured)
    if measured["kernels"]:
        kernel = next(k for k in measured["kernels"] if "scale_add_relu_kernel" in k["name"])
        assert kernel["duration_us"] > 0 and 0 < kernel["dram_pct"] <= 100 and kernel["occupancy_pct"] > 0, kernel
    else:  # ncu missing or not permitted on this host: the note names why and the fix
        assert "ncu" in measured["note"] and ("PATH" in measured["note"] or "ERR_NVGPUCTRPERM" in measured["note"]
                                              or "recorded no kernels" in measured["note"]), measured
