"""The lowest SDK versions pyproject.toml allows must work. This installs exactly those floors (and
what they pull in) into a temporary target directory with pip and runs the provider tests against them in a
subprocess, the floor directory first on the path. Skipped, saying why, when the package registry is out of
reach. `openai==1.50` (the old floor) cannot construct a client with httpx 0.28, and anthropic before 0.41
has no `messages.count_tokens`.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
SDKS = ("openai", "anthropic")
PROVIDER_TESTS = ["tests/llm/test_providers.py", "tests/llm/test_retries.py", "tests/llm/test_failures.py",
                  "tests/llm/test_keys.py", "tests/llm/test_context.py"]


def floors() -> dict[str, str]:
    """{"openai": "1.55.3", ...}: the `>=` bound of each SDK in pyproject.toml's dependencies."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    found = {}
    for dep in deps:
        match = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,\s]*)\s*(,.*)?", dep)
        if match and match.group(1).lower() in SDKS:
            found[match.group(1).lower()] = match.group(2)
    assert set(found) == set(SDKS), f"pyproject.toml must pin a floor (>=) for {SDKS}, found {found}"
    return found


@pytest.mark.slow
def test_the_provider_tests_pass_on_the_floor_versions(tmp_path: Path) -> None:
    versions = floors()
    target = tmp_path / "floor"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-input",
         "--target", str(target), *(f"{name}=={version}" for name, version in versions.items())],
        capture_output=True, text=True, timeout=600,
    )
    if install.returncode != 0:
        tail = (install.stderr or install.stdout).strip().splitlines()[-3:]
        if any(w in " ".join(tail).lower() for w in ("no matching distribution", "connection", "network",
                                                     "temporary failure", "max retries", "could not find")):
            pytest.skip(f"the package registry is out of reach, cannot install the floor SDKs: {' | '.join(tail)}")
        pytest.fail(f"pip could not install {versions}:\n{install.stderr}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)])}
    code = f"import importlib; print(*(importlib.import_module(n).__version__ for n in {list(versions)!r}))"
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    installed = probe.stdout.split()
    assert len(installed) == 2, probe.stdout + probe.stderr
    for (name, floor), got in zip(versions.items(), installed, strict=True):
        assert got.split(".")[:len(floor.split("."))] == floor.split("."), f"{name} {got} is not the floor {floor}"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "-m", "not slow", *PROVIDER_TESTS],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900,
    )
    assert run.returncode == 0, f"provider tests fail on {versions}:\n{run.stdout[-4000:]}\n{run.stderr[-2000:]}"
    assert " passed" in run.stdout
