"""The evaluation result: one typed, JSON-serializable object (keys are a contract, see docs/CONTRACTS.md §1)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypedDict

VERDICTS = ("pass", "incorrect", "rejected", "build_error", "runtime_error", "timeout")
CHECK_STATUSES = ("pass", "fail", "flag", "skipped")
LOG_LIMIT = 20_000


class CorrectnessDetail(TypedDict, total=False):
    """Keys of Correctness that a result may lack (older results, or provisional judgements)."""

    timed_seeds: list[int]
    mode: str
    digest: dict[str, Any]


class Correctness(CorrectnessDetail):
    trials: int
    passed: int
    atol: float
    rtol: float
    max_abs_error: float | None
    max_rel_error: float | None
    seeds: list[int]
    failing_seed: int | None


class Timing(TypedDict):
    median_ms: float
    iqr_ms: float
    min_ms: float
    mean_ms: float
    runs: int
    warmup: int


class Baselines(TypedDict):
    eager_ms: float | None
    compile_ms: float | None
    compile_max_autotune_ms: float | None


class Roofline(TypedDict):
    flops: float
    bytes: float
    achieved_tflops: float
    achieved_gbps: float
    pct_of_peak: float
    bound: str


class Check(TypedDict):
    name: str
    status: str
    detail: str


def truncate_log(text: str, limit: int = LOG_LIMIT) -> str:
    """Keep the head and the tail of a long log (compiler errors sit at both ends)."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + f"\n... [{len(text) - limit} characters cut] ...\n" + text[-half:]


@dataclass
class EvalResult:
    """What the harness concluded about one candidate, with everything needed to trust or replay it."""

    verdict: str
    reasons: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    correctness: Correctness | None = None
    integrity: list[Check] = field(default_factory=list)
    timing: Timing | None = None
    baselines: Baselines | None = None
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    roofline: Roofline | None = None
    logs: dict[str, str] = field(default_factory=lambda: {"build": "", "run": ""})
    settings: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    phases: list[dict[str, Any]] = field(default_factory=list)  # [{"phase", "seconds"}] in order (kernels.parent.phases)
    profile: dict[str, Any] | None = None  # where the forward spends its time (kernels.shared.profile, CONTRACTS §1)
    fuzz: dict[str, Any] | None = None  # the fuzzing stage: level, seed, variants run/skipped/failed, cost (kernels.parent.fuzz)
    # the reference and the candidate timed alternately in the candidate's own child, witnessed on the harness's
    # clock (kernels.shared.witness.figure): speedup, low, high, measurable, why, witness, ...; speedup_vs_eager comes from it
    side_by_side: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict {self.verdict!r} is not one of {VERDICTS}")

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def check(self, name: str) -> Check | None:
        return next((c for c in self.integrity if c["name"] == name), None)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["logs"] = {k: truncate_log(v) for k, v in self.logs.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown result key(s) {unknown}")
        return cls(**data)
