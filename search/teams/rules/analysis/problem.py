"""Load a KernelBench problem source into a namespace the rules team can read (Model, inputs, init inputs)."""

from __future__ import annotations

import hashlib
import types
from dataclasses import dataclass
from typing import Any


class ProblemLoadError(ValueError):
    """The problem source cannot be used by the rules team; the message names the missing piece."""


@dataclass
class LoadedProblem:
    module: types.ModuleType

    @property
    def model_class(self) -> type:
        return self.module.Model

    def init_inputs(self) -> list[Any]:
        return list(self.module.get_init_inputs())

    def inputs(self) -> list[Any]:
        return list(self.module.get_inputs())


def load_problem(source: str, name: str = "stark_rules_problem") -> LoadedProblem:
    """Execute the problem source in a fresh module; raise ProblemLoadError naming what is missing."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:10]
    module = types.ModuleType(f"{name}_{digest}")
    module.__file__ = f"<{name}_{digest}>"
    # Runs the problem's module-level code: only ever called inside the harness's isolated child (traced.py through
    # kernels.parent.isolation.isolated_call) or on the tests' own sources, never in a server process.
    exec(compile(source, module.__file__, "exec"), module.__dict__)  # noqa: S102
    for attr in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, attr):
            raise ProblemLoadError(f"the problem defines no {attr}; a KernelBench problem needs "
                                   "class Model(nn.Module), get_inputs() and get_init_inputs()")
    return LoadedProblem(module)
