"""A model's price per million tokens (search.llm.pricing finds it; search.llm.maintained_prices reads it from the
maintained package's bundled data)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Price:
    """USD per million tokens; cache reads/writes default to the input price when not given."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None
    source: str = field(default="", compare=False)  # where it came from, for messages and call records
    assumed: bool = field(default=False, compare=False)  # a conservative stand-in for an unknown model's price

    def describe(self) -> str:
        cached = "" if self.cache_read is None else f", cache read {self.cache_read:g}"
        return f"${self.input:g} in / ${self.output:g} out{cached} per million tokens"
