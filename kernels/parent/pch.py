"""Precompiled torch headers for the children's C++ builds: `torch/extension.h` parsed once per set of build flags
instead of once per build (on a 2-core host 40 of the 70 s of CPU a small OpenMP extension costs; the rest is
code generation).

GCC looks for `<header>.gch` in every include directory just before the header itself, and with a directory of that
name it tries each file in it and takes the first that is valid for the build's flags (the same compiler, target,
language options and macros); an invalid one is ignored and the header is parsed as usual. So a child gets one
include directory in `CPATH` (searched before torch's `-isystem` directories) holding `torch/extension.h` (a link to
torch's own) and `torch/extension.h.gch/`, one file per flag set: a build whose first include is
`torch/extension.h` (load_inline's, and what extensions start with) reads the parsed header, and any other build
compiles exactly as without it.

The headers are made by this trusted side only, never by a child: after a child, `learn` reads the flags of the
builds it made (their build.ninja), and for a flag set of the allowed kinds (optimisation, target, language, macros,
torch's and Python's include directories; no option that names another file to read or a program or plugin to run)
with no header yet, starts `c++` on torch's header alone in a detached, low-priority process. Builds after that one
use it. The directory is `$STARK_PCH_DIR` (`off`: none), or `pch/` under the harness cache; one subdirectory per
compiler, torch and Python, at most `MAX_HEADERS` flag sets (about 0.8 GB each).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

from kernels.parent import build_reuse

PCH_ENV = "STARK_PCH_DIR"
HEADER = "torch/extension.h"
MAX_HEADERS = 4  # flag sets per identity (each ~0.8 GB with torch 2.x)
STALE_S = 1200.0  # a header build marked as running longer than this has died
# one token of a build's flags that may go into a precompiled header's build: nothing that reads a file the flags
# name (-include, -imacros, @file, -specs), runs a program or plugin (-B, -wrapper, -fplugin) or passes options on
# (-Wp, -Wa, -Wl, -Xpreprocessor)
ALLOWED_FLAG = re.compile(
    r"-O[0-3sgz]?|-Ofast|-march=[\w.+-]+|-mtune=[\w.+-]+|-m(?:avx\w*|fma|sse[\w.]*|f16c|bmi2?|popcnt|no-\w+)|"
    r"-std=(?:c|gnu)\+\+\w+|-fPIC|-fpic|-fopenmp|-pthread|-ffast-math|-funroll-loops|-fno-[\w-]+|"
    r"-f(?:visibility|visibility-inlines-hidden|diagnostics-color)(?:=\w+)?|-g[0-3]?|-w|-W(?!p,|a,|l,)[\w=+-]*|"
    r"-D\w+(?:=[\w.\"+-]*)?|-U\w+"
)
INCLUDE_FLAGS = ("-isystem", "-I")


def pch_dir(cache_root: Path) -> Path | None:
    """This compiler's, torch's and Python's directory of precompiled headers (None: turned off)."""
    configured = os.environ.get(PCH_ENV, "")
    if configured.lower() == "off":
        return None
    import torch

    base = Path(configured) if configured else cache_root / "pch"
    key = hashlib.sha256(json.dumps([build_reuse.compiler_identity(_compiler()), torch.__version__, str(_torch_header()),
                                     sys.version]).encode()).hexdigest()[:16]
    return base / key


def child_dirs(cache_root: Path) -> dict[str, Path]:
    """{"CPATH": the directory} for a child whose C++ builds may read a precompiled header (bubblewrap shows it
    read-only at a place of its own: kernels.parent.isolation.sandbox.run_worker's `readable`); empty when there is
    none yet."""
    place = pch_dir(cache_root)
    if place is None or not any((place / (HEADER + ".gch")).glob("*.gch")):
        return {}
    return {"CPATH": place}


def child_env(cache_root: Path) -> dict[str, str]:
    """`child_dirs` as the environment of a process outside bubblewrap."""
    return {name: str(place) for name, place in child_dirs(cache_root).items()}


def learn(work_dir: Path, cache_root: Path) -> list[str]:
    """Start a header build for each allowed flag set of the child's builds (under work_dir's torch_extensions) that
    has none; the keys of those started."""
    return learn_from(work_dir / "cache" / "torch_extensions", pch_dir(cache_root))


def learn_from(extensions_dir: Path, place: Path | None) -> list[str]:
    """`learn` for the builds under a TORCH_EXTENSIONS_DIR, into the precompiled headers' directory `place`. Only a
    build that linked its library teaches its flags: a failed build's flags are never worth a header's slot."""
    if place is None:
        return []
    started = []
    for ninja in sorted(extensions_dir.glob("*/build.ninja")):
        if not any(ninja.parent.glob("*.so")):
            continue
        flags = build_flags(ninja.read_text(errors="replace"))
        if flags is not None and _start(place, flags):
            started.append(flag_key(flags))
    return started


def build_flags(ninja: str) -> list[str] | None:
    """The flags of a torch extension's C++ build (its build.ninja), its own name left out; None when a flag is not
    of the allowed kinds, or the compiler is not the one this process would run."""
    values = dict(re.findall(r"(?m)^(cxx|cflags|post_cflags) = (.*)$", ninja))
    if "cflags" not in values or values.get("cxx", "").strip() != _compiler():
        return None
    tokens = [*values["cflags"].split(), *values.get("post_cflags", "").split()]
    allowed_dirs = _include_dirs()
    flags: list[str] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token in INCLUDE_FLAGS and index + 1 < len(tokens):
            if tokens[index + 1] not in allowed_dirs:
                return None
            flags += [token, tokens[index + 1]]
            index += 2
            continue
        if token.startswith("-DTORCH_EXTENSION_NAME="):
            index += 1
            continue
        if not ALLOWED_FLAG.fullmatch(token):
            return None
        flags.append(token)
        index += 1
    return flags


def flag_key(flags: list[str]) -> str:
    return hashlib.sha256(" ".join(flags).encode()).hexdigest()[:16]


def _start(place: Path, flags: list[str]) -> bool:
    gch_dir = place / (HEADER + ".gch")
    key = flag_key(flags)
    target = gch_dir / f"{key}.gch"
    if target.exists() or len(list(gch_dir.glob("*.gch"))) >= MAX_HEADERS:
        return False
    gch_dir.mkdir(parents=True, exist_ok=True)
    header = place / HEADER
    if not header.exists():
        with contextlib.suppress(FileExistsError):
            header.symlink_to(_torch_header())
    marker = gch_dir / f"{key}.building"
    with contextlib.suppress(FileNotFoundError):
        if time.time() - marker.stat().st_mtime > STALE_S:
            marker.unlink()
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    partial = gch_dir / f"{key}.partial"
    # the compiler alone on torch's header, renamed into place only when whole; the marker goes either way
    script = ('nice -n 10 "$@" -x c++-header "$HEADER" -o "$PARTIAL" >/dev/null 2>&1 && chmod 0444 "$PARTIAL" && '
              'mv -f "$PARTIAL" "$TARGET"; rm -f "$PARTIAL" "$MARKER"')
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HEADER": str(header), "PARTIAL": str(partial),
           "TARGET": str(target), "MARKER": str(marker), "LANG": "C"}
    subprocess.Popen(["sh", "-c", script, "sh", _compiler(), *flags], stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True,
                     close_fds=True)
    return True


def _compiler() -> str:
    return os.environ.get("CXX", "c++")


def _torch_header() -> Path:
    import torch

    return Path(torch.__file__).resolve().parent / "include" / HEADER


def _include_dirs() -> set[str]:
    from torch.utils.cpp_extension import include_paths

    dirs = {*include_paths(), sysconfig.get_paths()["include"]}
    with contextlib.suppress(Exception):  # CUDA's include directory, where torch finds a CUDA toolkit
        dirs.update(include_paths("cuda"))
    return dirs
