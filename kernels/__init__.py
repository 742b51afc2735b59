"""STARK Studio's evaluation harness: isolated, integrity-checked correctness and timing of kernel candidates.

Pure: never imports Django. See docs/CONTRACTS.md §1 and `python -m kernels --help`.
"""

from __future__ import annotations

from kernels.parent.evaluate import evaluate
from kernels.parent.problem import ProblemSummary, inspect_problem, reference_candidate
from kernels.parent.result import EvalResult
from kernels.parent.settings import EvalSettings
from kernels.shared.errors import ProblemError

__all__ = ["EvalResult", "EvalSettings", "ProblemError", "ProblemSummary", "evaluate", "inspect_problem",
           "reference_candidate"]
