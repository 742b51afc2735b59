"""STARK Studio's evaluation harness: isolated, integrity-checked correctness and timing of kernel candidates.

Pure: never imports Django. See docs/CONTRACTS.md §1 and `python -m kernels --help`.
"""

from __future__ import annotations

from kernels.errors import ProblemError
from kernels.evaluate import evaluate
from kernels.problem import ProblemSummary, inspect_problem, reference_candidate
from kernels.result import EvalResult
from kernels.settings import EvalSettings

__all__ = ["EvalResult", "EvalSettings", "ProblemError", "ProblemSummary", "evaluate", "inspect_problem",
           "reference_candidate"]
