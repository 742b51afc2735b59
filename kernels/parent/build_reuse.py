"""Build reuse: a candidate's torch extension builds (load_inline / cpp_extension.load, built by ninja in its child's
TORCH_EXTENSIONS_DIR) handed to its later children, so its re-time, a re-evaluation and a bundle check load the
build its evaluation made instead of compiling it again (CPU: 30-40 s a child for a small OpenMP extension).

The builds travel in the candidate's own compile seed (kernels.parent.compile_seed: copied into the new child's work
dir, its old work dir's path replaced by the new one's, byte for byte, and ninja's log rewritten by
kernels.parent.ninja_log, so ninja finds the build up to date). This module says what such a build depends on
beyond the candidate's source (build_identity: a change of any of them keys another seed, so a build made with
another compiler, torch, harness or build flags is never loaded), which verdicts keep builds (kept_after), and how
a result shows that a child reused builds instead of building (reported_builds). A planted build that does not load
costs a build, never a verdict: the evaluation is judged again without the seed (kernels.parent.evaluate), a re-time
runs again without it (kernels.parent.retime).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from kernels.parent import cache

FORMAT = 1  # bump when what a kept build holds, or how it is planted, changes
# the environment torch's extension builds read (compilers, their flags, CUDA's location and target architectures)
BUILD_ENV = ("CC", "CXX", "CFLAGS", "CXXFLAGS", "LDFLAGS", "CUDA_HOME", "CUDA_PATH", "TORCH_CUDA_ARCH_LIST",
             "TORCH_NVCC_FLAGS", "NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS")
# verdicts reached after the build: a pass keeps the whole seed (compiled code of every kind), these its builds only
BUILDS_ONLY = ("incorrect", "rejected")

_COMPILERS: dict[str, str] = {}


def compiler_identity(name: str) -> str:
    """The compiler `name` resolves to on $PATH (its real path, size and modification time, read once per process:
    an upgrade changes them), or "none". Read from the file, without running it."""
    if name not in _COMPILERS:
        found = shutil.which(name)
        try:
            real = os.path.realpath(found) if found else ""
            info = os.stat(real) if real else None
        except OSError:
            info = None
        _COMPILERS[name] = f"{real}:{info.st_size}:{info.st_mtime_ns}" if info else "none"
    return _COMPILERS[name]


def build_identity(device: str) -> dict[str, Any]:
    """What a candidate's build depends on besides its source: the device kind, torch, the harness, the compilers
    torch would call and the build environment (kernels.parent.compile_seed keys a candidate's own seed by it)."""
    compilers = [os.environ.get("CXX") or "c++"]
    if device.startswith("cuda"):
        cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
        compilers.append(str(Path(cuda_home) / "bin" / "nvcc") if cuda_home else "nvcc")
    return {"format": FORMAT, "device": device.split(":")[0], "torch": cache.torch_version(),
            "harness": cache.harness_version(), "compilers": [compiler_identity(c) for c in compilers],
            "env": {name: os.environ[name] for name in BUILD_ENV if name in os.environ}}


def kept_after(verdict: str, reported: bool) -> str | None:
    """What of a candidate child's compiled code is kept for its later children: "all" after a pass, "builds" after
    another verdict reached past the build (the child reported its result), None otherwise (a build error, a crash,
    a timeout: nothing known to load)."""
    if verdict == "pass":
        return "all"
    return "builds" if verdict in BUILDS_ONLY and reported else None


def planted_builds(work_dir: Path) -> int:
    """The torch extension build dirs a child's work dir holds before it starts (what the seed planted)."""
    top = work_dir / "cache" / "torch_extensions"
    try:
        return sum(1 for d in top.iterdir() if d.is_dir() and not d.is_symlink())
    except OSError:
        return 0


def reported_builds(facts: Any) -> dict[str, int] | None:
    """{"built", "reused"} from a child's `extension_builds` fact (how many of the torch extensions it loaded it
    built, how many were planted built), or None when it loaded none."""
    if not isinstance(facts, dict) or not facts:
        return None
    return {k: int(v) for k, v in facts.items() if k in ("built", "reused") and isinstance(v, int)} or None


def mark_build_phase(phases: list[dict[str, Any]], builds: dict[str, int] | None) -> None:
    """The "build" phase says so when the child built nothing and loaded reused builds (`"reused_builds": n`), so a
    short build reads "build: reused", not as a build that took no time."""
    if not builds or builds.get("built") or not builds.get("reused"):
        return
    for phase in phases:
        if phase.get("phase") == "build":
            phase["reused_builds"] = builds["reused"]


def build_line(builds: dict[str, int] | None) -> str | None:
    """One line for a text report: what the child built and what it reused."""
    if not builds:
        return None
    built, reused = builds.get("built", 0), builds.get("reused", 0)
    if reused and not built:
        return f"build: reused ({reused} torch extension(s) built by an earlier child of this same source)"
    return f"build: {built} torch extension(s) built" + (f", {reused} reused" if reused else "")
