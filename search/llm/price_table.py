"""The built-in price table: list prices in USD per million tokens, as data, with the date they were read.

Columns: input, output, cache read, cache write (Anthropic's 5-minute writes; None: the input price).
Keys are model names; a key also prices dated or versioned names of its model (`claude-sonnet-4-5-20250929`,
`gpt-5-2025-08-07`, `gpt-5.1`) but never another tier (`gpt-5` does not price `gpt-5-nano` or `gpt-5-pro`:
see pricing.TIER_WORDS). Generic family keys (`claude-sonnet`) price newer models of a family at its list
price, and the call record says the price was a family estimate.

Why not `genai-prices` (pydantic's table of ~1,000 models): it would price many more models, but it updates
itself from the network at run time by default (GPU hosts are often offline, and a price that changes
under a running cost limit is surprising), it is one more dependency for ~25 rows this project uses, and
local servers (the common openai-compatible case) are not in it anyway. Update the rows below (and AS_OF)
from the sources, or override them per deployment with STARK_PRICES_JSON or per run with --price.
"""

from __future__ import annotations

AS_OF = "2025-11-30"
SOURCES = ("https://docs.anthropic.com/en/docs/about-claude/pricing", "https://openai.com/api/pricing/")

ROWS: dict[str, tuple[float, float, float | None, float | None]] = {
    # Anthropic
    "claude-opus": (5.0, 25.0, 0.5, 6.25),  # family: Opus 4.5 and later
    "claude-opus-4-5": (5.0, 25.0, 0.5, 6.25),
    "claude-opus-4-1": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-0": (15.0, 75.0, 1.5, 18.75),
    "claude-opus-4-20250514": (15.0, 75.0, 1.5, 18.75),
    "claude-3-opus": (15.0, 75.0, 1.5, 18.75),
    "claude-sonnet": (3.0, 15.0, 0.3, 3.75),  # family: Sonnet 4, 4.5
    "claude-3-7-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-3-5-sonnet": (3.0, 15.0, 0.3, 3.75),
    "claude-haiku": (1.0, 5.0, 0.1, 1.25),  # family: Haiku 4.5
    "claude-3-5-haiku": (0.8, 4.0, 0.08, 1.0),
    "claude-3-haiku": (0.25, 1.25, 0.03, 0.3),
    # OpenAI (cached input is a read; writes cost the input price)
    "gpt-5": (1.25, 10.0, 0.125, None),  # also gpt-5.1, gpt-5-codex, gpt-5-chat-latest
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
