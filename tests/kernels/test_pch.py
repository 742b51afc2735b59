"""Precompiled torch headers (kernels.parent.pch): which build flags may make one, and a C++ candidate's evaluation
leaving one behind that the next build with its flags reads instead of parsing torch's header again."""

from __future__ import annotations

import os
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest

from kernels import EvalSettings, evaluate
from kernels.parent import pch
from tests.kernels.conftest import fixture_source


def _ninja(cflags: str, cxx: str = "c++") -> str:
    from torch.utils.cpp_extension import include_paths

    torch_dirs = " ".join(f"-isystem {d}" for d in include_paths())
    return (f"ninja_required_version = 1.3\ncxx = {cxx}\n\ncflags = -DTORCH_EXTENSION_NAME=ext_1 "
            f"-DTORCH_API_INCLUDE_EXTENSION_H {torch_dirs} -isystem {sysconfig.get_paths()['include']} -fPIC "
            f"-std=c++17 {cflags}\npost_cflags = \n")


def test_the_flags_of_a_build_keep_everything_but_its_name() -> None:
    flags = pch.build_flags(_ninja("-O3 -march=native -ffast-math -fopenmp -DVEC=8 -Wno-unused"))
    assert flags is not None and "-O3" in flags and "-DVEC=8" in flags
    assert not any(f.startswith("-DTORCH_EXTENSION_NAME") for f in flags)
    assert pch.flag_key(flags) == pch.flag_key(pch.build_flags(_ninja(
        "-O3 -march=native -ffast-math -fopenmp -DVEC=8 -Wno-unused").replace("ext_1", "ext_2")) or [])


@pytest.mark.parametrize("cflags", ["-include /tmp/evil.h", "-imacros x.h", "@/tmp/flags", "-fplugin=/tmp/p.so",
                                    "-B/tmp/bin", "-Wp,-include,/tmp/x.h", "-I /tmp/headers", "-isystem /tmp",
                                    "-specs=/tmp/s", "-wrapper /tmp/w"])
def test_no_header_is_made_for_flags_that_read_another_file_or_run_a_program(cflags: str) -> None:
    assert pch.build_flags(_ninja(cflags)) is None


def test_no_header_is_made_for_another_compiler_than_the_harness_runs() -> None:
    assert pch.build_flags(_ninja("-O2", cxx="/tmp/work/cc")) is None


def test_a_build_that_linked_no_library_teaches_no_header(tmp_path: Path) -> None:
    build = tmp_path / "torch_extensions" / "broken_ext"
    build.mkdir(parents=True)
    (build / "build.ninja").write_text(_ninja("-O2"))
    (build / "main.o.d").write_text("")
    assert pch.learn_from(tmp_path / "torch_extensions", tmp_path / "pch") == []
    assert not (tmp_path / "pch").exists()


@pytest.mark.slow  # a C++ candidate's evaluation and, once per session, a header build
def test_a_cpp_candidate_leaves_a_header_that_the_next_build_with_its_flags_reads(
        tmp_path: Path, warm_settings: EvalSettings) -> None:
    settings = warm_settings.replace(cache_dir=str(tmp_path / "cache"))
    result = evaluate(fixture_source("problem_scale_add"), fixture_source("cpp_openmp"), settings)
    assert result.verdict == "pass", result.reasons
    place = pch.pch_dir(tmp_path / "cache")
    assert place is not None
    deadline = time.monotonic() + 600
    while not pch.child_env(tmp_path / "cache") and time.monotonic() < deadline:
        time.sleep(1)
    env = pch.child_env(tmp_path / "cache")
    assert env == {"CPATH": str(place)}, sorted(p.name for p in place.rglob("*"))
    source = tmp_path / "main.cpp"
    source.write_text("#include <torch/extension.h>\nint twice(int x) { return 2 * x; }\n")
    # the candidate's build as its build.ninja names it (its build is kept with the candidate after a pass)
    ninja = next((tmp_path / "cache").rglob("build.ninja"))
    flags = pch.build_flags(ninja.read_text())
    assert flags is not None
    shown = subprocess.run(["c++", *flags, "-H", "-fsyntax-only", str(source)], capture_output=True, text=True,
                           env={**os.environ, **env}, timeout=300)
    assert shown.returncode == 0, shown.stderr[-2000:]
    # the header was read ("!": a valid precompiled header), not torch/extension.h parsed again
    assert f"! {place}/torch/extension.h.gch/" in shown.stderr, shown.stderr[:2000]
