"""What one LLM call cost and what was sent: the per-call record stored on nodes and runs."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Completion:
    """A provider's answer, normalised: `input_tokens` counts the whole prompt, cached parts included."""

    text: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    stop_reason: str | None = None
    usage_reported: bool = True


@dataclass
class CallRecord:
    """One call as the run log shows it. `temperature` is what was actually sent (None: not sent)."""

    role: str
    provider: str
    model: str
    temperature: float | None
    temperature_requested: float | None
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    price_known: bool = False
    latency_s: float = 0.0
    retries: int = 0
    streamed: bool = False
    prompt_version: str = ""
    stop_reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CostMeter:
    """Running cost of a run, shared by every agent of a team; enforces the run's cost limit."""

    def __init__(self, limit_usd: float | None = None) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = 0.0
        self.calls = 0

    def check(self) -> None:
        from search.llm.errors import CostLimitReached

        if self.limit_usd is not None and self.spent_usd >= self.limit_usd:
            raise CostLimitReached(self.spent_usd, self.limit_usd)

    def add(self, record: CallRecord) -> None:
        self.spent_usd += record.cost_usd
        self.calls += 1
