"""The kernel languages a run's agents write, with what each is (the new-run form shows it)."""

from __future__ import annotations

TARGET_ABOUT = {"cpp": "C++/OpenMP on the CPU", "cuda": "CUDA C++ (load_inline)", "triton": "Triton",
                "torch": "PyTorch-level rewrites"}
TARGETS = tuple(TARGET_ABOUT)
GPU_TARGETS = ("cuda", "triton")
