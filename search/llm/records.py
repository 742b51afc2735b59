"""What one LLM call cost and what was sent: the per-call record stored on nodes and runs."""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import Any

from search.llm.errors import CostLimitReached


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
    reasoning_tokens: int = 0  # hidden reasoning / thinking, part of output_tokens (and billed as output)


@dataclass
class CallRecord:
    """One call as the run log shows it. `temperature` is what was actually sent (None: not sent);
    `temperature_dropped` says why a requested one was not ("refused" or "reasoning", search.llm.temperature)
    and `temperature_note` says it in words."""

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
    temperature_dropped: str = ""
    temperature_note: str = ""
    reasoning_tokens: int = 0  # of output_tokens, the model's hidden reasoning (OpenAI) or thinking (Anthropic)
    max_tokens_sent: int = 0  # the request's token limit: the answer's own plus the reasoning headroom
    stream_requested: bool = False  # streaming was asked for; `streamed` says whether this call streamed
    stream_note: str = ""  # why it did not (the server refused to stream the model)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CostMeter:
    """Running cost of a run, shared by every agent of a team and every attempt in flight; enforces the
    run's cost limit *before* each call: a call starts only if what is spent, plus the worst cases of the
    calls in flight, plus this call's worst case (its input estimate and its whole answer limit) stays
    within the limit; it waits for calls in flight when only they are in the way. So the run never spends
    more than the limit while the estimates hold. Also sums tokens, cache reads and writes."""

    def __init__(self, limit_usd: float | None = None, spent_usd: float = 0.0) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = spent_usd
        self.reserved_usd = 0.0
        self.calls = 0
        self.input_tokens = 0
        self.cache_read_tokens = 0
        self.cache_write_tokens = 0
        self.reasoning_tokens = 0
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def reserve(self, worst_usd: float, what: str = "the next call") -> float:
        """Hold `worst_usd` for a call about to start. When it fits only once calls in flight settle, wait for
        them; when it cannot fit even then, raise CostLimitReached. Returns the amount held, for settle()."""
        with self._changed:
            while self.limit_usd is not None:
                if self.spent_usd >= self.limit_usd or self.spent_usd + worst_usd > self.limit_usd:
                    raise CostLimitReached(self.spent_usd, self.limit_usd, worst_usd, self.reserved_usd, what)
                if self.spent_usd + self.reserved_usd + worst_usd <= self.limit_usd:
                    break
                self._changed.wait()
            self.reserved_usd += worst_usd
        return worst_usd

    def settle(self, held_usd: float, record: CallRecord | None = None) -> None:
        """Release a reservation and count what the call really cost (None: it failed, nothing billed)."""
        with self._changed:
            self.reserved_usd = max(0.0, self.reserved_usd - held_usd)
            if record is not None:
                self._count(record)
            self._changed.notify_all()

    def _count(self, record: CallRecord) -> None:
        self.spent_usd += record.cost_usd
        self.calls += 1
        self.input_tokens += record.input_tokens
        self.cache_read_tokens += record.cache_read_tokens
        self.cache_write_tokens += record.cache_write_tokens
        self.reasoning_tokens += record.reasoning_tokens

    def summary(self) -> dict[str, Any]:
        """Totals for the run's usage record, with the share of input tokens read from the prompt cache."""
        with self._lock:
            rate = self.cache_read_tokens / self.input_tokens if self.input_tokens else 0.0
            return {"calls": self.calls, "cost_usd": round(self.spent_usd, 8), "input_tokens": self.input_tokens,
                    "cache_read_tokens": self.cache_read_tokens, "cache_write_tokens": self.cache_write_tokens,
                    "reasoning_tokens": self.reasoning_tokens, "cache_hit_rate": round(rate, 4), "limit_usd": self.limit_usd}
