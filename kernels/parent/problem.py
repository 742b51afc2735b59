"""Problem summaries (`inspect_problem`) and the reference-as-candidate used for a search's root."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kernels.parent.reference import ensure_reference
from kernels.parent.settings import EvalSettings
from kernels.shared.static_check import check_problem_source


@dataclass
class ProblemSummary:
    """What a problem computes: shapes/dtypes in and out, parameters, FLOPs, minimum bytes moved, memory."""

    inputs: list[dict[str, Any]]
    outputs: list[dict[str, Any]]
    init_inputs: list[str] = field(default_factory=list)
    parameters: int = 0
    flops: float = 0.0
    bytes: int = 0
    memory_mb: float = 0.0
    forward_ms: float = 0.0
    device: str = "cpu"
    ops: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def arithmetic_intensity(self) -> float:
        return self.flops / self.bytes if self.bytes else 0.0


def inspect_problem(problem_source: str, device: str = "cpu",
                    settings: EvalSettings | dict[str, Any] | None = None) -> ProblemSummary:
    """Validate a problem in a child process and summarize it; raises ProblemError naming the problem and fix."""
    settings = EvalSettings.coerce(settings)
    if device != settings.device:
        settings = settings.replace(device=device)
    check_problem_source(problem_source)
    # nothing here is timed: no device lock, so a check never waits behind an evaluation's hold of it
    reference, _ = ensure_reference(problem_source, settings.replace(roofline=False, exclusive_device=False),
                                    baselines=(), outputs=False)
    data = {k: v for k, v in reference.summary.items() if k in ProblemSummary.__dataclass_fields__}
    from kernels.shared.ops import compute_ops

    return ProblemSummary(**data, ops=sorted(compute_ops(set(reference.ops))))


def reference_candidate(problem_source: str) -> str:
    """The problem itself as a candidate (`ModelNew` = `Model`): evaluating it gives the reference's runtime."""
    return (problem_source.rstrip() + "\n\n\nclass ModelNew(Model):\n"
            '    """The reference model, unchanged (the root of a search)."""\n')
