"""STARK Studio's evaluation harness: isolated, integrity-checked correctness and timing of kernel candidates.

Pure: never imports Django. See docs/CONTRACTS.md §1 and `python -m kernels --help`.

The harness is split by process side: kernels.child runs only inside an isolated harness child (the process that
imports untrusted code), kernels.parent only in the process that evaluates, and kernels.shared is what both
import. The public API below lives on the parent's side and is imported on first use, so that a harness child,
which imports this package as the parent of kernels.child, loads nothing of the parent's code.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernels.parent.evaluate import evaluate
    from kernels.parent.problem import ProblemSummary, inspect_problem, reference_candidate
    from kernels.parent.result import EvalResult
    from kernels.parent.settings import EvalSettings
    from kernels.shared.errors import ProblemError

PUBLIC = {"EvalResult": "kernels.parent.result", "EvalSettings": "kernels.parent.settings",
          "ProblemError": "kernels.shared.errors", "ProblemSummary": "kernels.parent.problem",
          "evaluate": "kernels.parent.evaluate", "inspect_problem": "kernels.parent.problem",
          "reference_candidate": "kernels.parent.problem"}

__all__ = ["EvalResult", "EvalSettings", "ProblemError", "ProblemSummary", "evaluate", "inspect_problem",
           "reference_candidate"]


def __getattr__(name: str) -> Any:
    """`from kernels import evaluate` and the like: the public API, imported from its module on first use."""
    module = PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'kernels' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
