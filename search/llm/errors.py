"""Errors from LLM providers, with a `permanent` flag so callers know whether retrying can help."""

from __future__ import annotations


class LLMError(Exception):
    """A provider call failed. `permanent` means retrying the same call cannot succeed
    (bad key, no such model, out of quota, cost limit); otherwise retries were exhausted.
    `kind` says which permanent failure it is ("quota", "cost", "context", "config", ...)."""

    def __init__(self, message: str, permanent: bool = False, status: int | None = None, kind: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.permanent = permanent
        self.status = status
        self.kind = kind or ("permanent" if permanent else "transient")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, permanent={self.permanent}, status={self.status})"


class ContextTooLong(LLMError):
    """The prompt and the answer limit do not fit the model's context window: the agent may shrink
    its window once, then the run stops naming --context-tokens and --max-tokens."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message, permanent=True, status=status, kind="context")


class ConfigError(LLMError, ValueError):
    """The LLM settings are wrong (unknown provider, missing key or model); names the fix.
    A ValueError too, so option validation treats it like any other bad option."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True, kind="config")


class CostLimitReached(LLMError):
    """The run's cost limit would be passed by the next call (its worst case); the run stops with this message."""

    def __init__(self, spent_usd: float, limit_usd: float, worst_usd: float = 0.0, reserved_usd: float = 0.0,
                 what: str = "the next call") -> None:
        self.spent_usd, self.limit_usd = spent_usd, limit_usd
        held = f", ${reserved_usd:.4f} held by calls in flight" if reserved_usd else ""
        worst = f"; {what} could cost up to ${worst_usd:.4f}" if worst_usd else ""
        super().__init__(
            f"cost limit reached: ${spent_usd:.4f} spent of ${limit_usd:.4f} allowed for this run{held}{worst}; "
            "raise --cost-limit (run setting cost_limit_usd), or lower --max-tokens so each call's worst case "
            "is smaller, to continue",
            permanent=True, kind="cost",
        )
        self.spent_usd = spent_usd
        self.limit_usd = limit_usd
