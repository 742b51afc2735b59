"""The dated price table: list prices in USD per million tokens, as data, with the date they were read. It is the
fallback of the maintained source (search.llm.maintained_prices, the genai-prices package's bundled data), which
prices Anthropic and OpenAI models first when it is installed; the rows below were read from that data and the
vendors' pages on AS_OF, so a host without the package prices the current models the same.

Columns: input, output, cache read, cache write (Anthropic's 5-minute writes; None: the input price).
Keys are model names; a key also prices dated or versioned names of its model (`claude-sonnet-4-5-20250929`,
`gpt-5-2025-08-07`) but never another tier (`gpt-5` does not price `gpt-5-nano` or `gpt-5-pro`: see
pricing.TIER_WORDS). There are no family keys: a model no row prices is priced conservatively by the LLM teams
(pricing.assumed_price: the highest rates of its family), and the run says so at its start.

Update the rows (and AS_OF) from the sources, or override them per deployment with STARK_PRICES_JSON or per run
with --price.
"""

from __future__ import annotations

AS_OF = "2026-12-06"
SOURCES = ("genai-prices 0.2.5 (bundled data)", "https://docs.anthropic.com/en/docs/about-claude/pricing",
           "https://openai.com/api/pricing/")

ROWS: dict[str, tuple[float, float, float | None, float | None]] = {
    # Anthropic
    "claude-fable-5-2": (8.0, 40.0, 0.2, 10.0),
    "claude-opus-5-5": (4.0, 20.0, 0.2, 5.0),
    "claude-opus-5": (5.0, 25.0, 0.5, 6.25),
    "claude-sonnet-5-5": (2.0, 10.0, 0.1, 2.5),
    "claude-sonnet-5": (2.0, 10.0, 0.2, 2.5),
    "claude-haiku-5-5": (0.1, 0.5, 0.01, 0.125),
    "claude-opus-4-8": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-7": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-6": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-0": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-20250514": (15.0, 75.0, 1.5, 18.75),
    "claude-3-opus": (15.0, 75.0, 1.5, 18.75),
    "claude-sonnet-4-6": (3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4-5": (3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4-0": (3.0, 15.0, 0.3, 3.75),
    "claude-sonnet-4-20250514": (3.0, 15.0, 0.3, 3.75),
    "claude-3-7-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-haiku-4-5": (1.0, 5.0, 0.1, 1.25),
    "claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "claude-3-haiku": (0.25, 1.25, 0.03, 0.3),
    # OpenAI (cached input is a read; writes cost the input price where no write price is given)
    "gpt-6.2-astra": (8.0, 40.0, 0.4, 10.0),
    "gpt-6.2-sol": (2.0, 10.0, 0.1, 2.5),
    "gpt-6.1-sol": (2.0, 10.0, 0.1, 2.5),
    "gpt-6.1-terra": (1.0, 5.0, 0.05, 1.25),
    "gpt-6-astra": (10.0, 50.0, 1.0, 12.5),
    "gpt-6-sol": (2.0, 10.0, 0.2, 2.5),
    "gpt-6-luna": (0.1, 0.5, 0.01, 0.125),
    "gpt-5.6-sol": (4.0, 20.0, 0.4, 5.0),
    "gpt-5.6-terra": (2.0, 12.0, 0.2, 2.5),
    "gpt-5.6-luna": (0.2, 1.2, 0.02, 0.25),
    "gpt-5.5": (5.0, 30.0, 0.5, None),
    "gpt-5.5-pro": (30.0, 180.0, None, None),
    "gpt-5.4": (2.5, 15.0, 0.25, None),
    "gpt-5.4-mini": (0.75, 4.5, 0.075, None),
    "gpt-5.4-nano": (0.2, 1.25, 0.02, None),
    "gpt-5.4-pro": (30.0, 180.0, None, None),
    "gpt-5.3": (1.75, 14.0, 0.175, None),
    "gpt-5.2": (1.75, 14.0, 0.175, None),
    "gpt-5.1": (1.25, 10.0, 0.125, None),
    "gpt-5": (1.25, 10.0, 0.125, None),  # also gpt-5-codex, gpt-5-chat-latest
    "gpt-5-mini": (0.25, 2.0, 0.025, None),
    "gpt-5-nano": (0.05, 0.4, 0.005, None),
    "gpt-5-pro": (15.0, 120.0, None, None),
    "gpt-5.1-codex-mini": (0.25, 2.0, 0.025, None),
    "gpt-4.1": (2.0, 8.0, 0.5, None),
    "gpt-4.1-mini": (0.4, 1.6, 0.1, None),
    "gpt-4.1-nano": (0.1, 0.4, 0.025, None),
    "gpt-4o": (2.5, 10.0, 1.25, None),
    "gpt-4o-mini": (0.15, 0.6, 0.075, None),
    "o1": (15.0, 60.0, 7.5, None),
    "o1-mini": (1.1, 4.4, 0.55, None),
    "o1-pro": (150.0, 600.0, None, None),
    "o3": (2.0, 8.0, 0.5, None),
    "o3-mini": (1.1, 4.4, 0.55, None),
    "o3-pro": (20.0, 80.0, None, None),
    "o4-mini": (1.1, 4.4, 0.275, None),
    "codex-mini-latest": (1.5, 6.0, 0.375, None),
}
