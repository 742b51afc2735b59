"""`make run`'s gpu workers (scripts/procfile.py): one on a host without a GPU, up to 8 per GPU on a GPU host
(never more than half the cores), or the count $STARK_GPU_WORKERS names; a bad value stops `make run` naming it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "procfile.py"
spec = importlib.util.spec_from_file_location("procfile", SCRIPT)
assert spec is not None and spec.loader is not None
procfile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(procfile)


def test_auto_is_one_without_a_gpu_and_eight_per_gpu_within_half_the_cores() -> None:
    assert procfile.gpu_workers("auto", gpus=0, cores=64) == 1
    assert procfile.gpu_workers("", gpus=1, cores=16) == 8  # one H200 host
    assert procfile.gpu_workers("auto", gpus=2, cores=32) == 16
    assert procfile.gpu_workers("auto", gpus=2, cores=8) == 4
    assert procfile.gpu_workers("AUTO", gpus=1, cores=1) == 1
    assert procfile.gpu_workers("3", gpus=0, cores=2) == 3


@pytest.mark.parametrize("bad", ["0", "-1", "two", "2.5"])
def test_a_bad_value_names_the_setting(bad: str) -> None:
    with pytest.raises(ValueError, match=r"STARK_GPU_WORKERS=.* must be a number of gpu workers .* or auto"):
        procfile.gpu_workers(bad, gpus=1, cores=16)


def test_the_gpu_line_is_repeated_under_names_of_its_own() -> None:
    text = (ROOT / "Procfile").read_text()
    out = procfile.expand(text, 3)
    gpu = [line for line in text.splitlines() if line.startswith("gpu:")][0]
    assert out.splitlines()[: len(text.splitlines())] == text.splitlines()
    assert out.splitlines()[-2:] == [gpu.replace("gpu:", "gpu2:", 1), gpu.replace("gpu:", "gpu3:", 1)]
    assert procfile.expand(text, 1) == text.rstrip("\n") + "\n"
    with pytest.raises(ValueError, match="exactly one `gpu:` line"):
        procfile.expand("web: x\n", 2)


@pytest.mark.slow  # runs the script as make run does
def test_the_script_writes_the_procfile_and_refuses_a_bad_value(tmp_path: Path) -> None:
    dest = tmp_path / "Procfile.run"
    env = {"PATH": "/usr/bin:/bin", "STARK_GPU_WORKERS": "2"}
    done = subprocess.run([sys.executable, str(SCRIPT), str(ROOT / "Procfile"), str(dest)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr
    assert [line.split(":", 1)[0] for line in dest.read_text().splitlines()].count("gpu2") == 1
    bad = subprocess.run([sys.executable, str(SCRIPT), str(ROOT / "Procfile"), str(tmp_path / "x")],
                         env={**env, "STARK_GPU_WORKERS": "many"}, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "STARK_GPU_WORKERS='many'" in bad.stderr and not (tmp_path / "x").exists()
