"""`make run`'s Procfile: the repository's, with as many gpu workers as $STARK_GPU_WORKERS asks.

Each gpu worker runs one evaluation at a time; several on one GPU take turns on it through the harness's device lock
(timed work alone, compiles and checks side by side). `auto` (the default): 1 on a host without an NVIDIA GPU, where
evaluations time on the CPU that the others would compile on; on a GPU host min(8 per GPU, half the cores), since on
one H200 (16 cores) 8 evaluations side by side judged 5.9 attempts a minute and 12 no more (one compiler process
each; 4 with compiler pools judged 3.7: docs/benchmarks.md, throughput).

Usage: procfile.py SOURCE DEST   (stdlib only; prints the number of gpu workers)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

ENV = "STARK_GPU_WORKERS"
PER_GPU = 8


def gpu_count() -> int:
    """NVIDIA GPUs that nvidia-smi lists (0 without the tool or a driver)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in listed.stdout.splitlines() if line.startswith("GPU ")) if listed.returncode == 0 else 0


def gpu_workers(raw: str, gpus: int, cores: int) -> int:
    """How many gpu workers: a count of at least 1, or auto."""
    value = raw.strip().lower() or "auto"
    if value == "auto":
        return 1 if gpus == 0 else max(1, min(PER_GPU * gpus, cores // 2))
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise ValueError(f"{ENV}={raw!r} must be a number of gpu workers (1 or more) or auto (1 without a GPU; on a GPU "
                     f"host {PER_GPU} per GPU, at most half the cores)")


def expand(procfile: str, workers: int) -> str:
    """The Procfile with its `gpu:` line repeated as gpu2:, gpu3:, ... up to `workers` lines in all."""
    lines = procfile.splitlines()
    gpu = [line for line in lines if line.startswith("gpu:")]
    if len(gpu) != 1:
        raise ValueError("the Procfile must have exactly one `gpu:` line")
    extra = [f"gpu{k}:{gpu[0][len('gpu:'):]}" for k in range(2, workers + 1)]
    return "\n".join([*lines, *extra]) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    source, dest = argv
    try:
        workers = gpu_workers(os.environ.get(ENV, "auto"), gpu_count(), os.cpu_count() or 1)
        with open(source) as f:
            text = expand(f.read(), workers)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with open(dest, "w") as f:
        f.write(text)
    print(workers)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
