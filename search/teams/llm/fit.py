"""Fitting the context window to the model: an honest token budget, and one shrink after a context-length error.

The engine renders a window within a budget measured at about four characters a token, which undercounts
code; `fitted_budget` measures the rendered window with the provider's counter (Anthropic's count_tokens,
tiktoken for OpenAI's models, else the code-aware estimate) when it may be near the budget, and lowers the
budget once so the real count fits. A server that still answers "context length exceeded" (a 32k local model
given a 30k window plus 8,192 answer tokens) gets the window shrunk once by what its message says is too much
(else halved): `shrunk_budget`.
"""

from __future__ import annotations

import re

from search.engine.agents import ContextWindow
from search.llm import LLMClient
from search.llm.tokens import estimate_tokens

# Counting costs a request (Anthropic) or a tokenizer pass: only when the estimate is this close to the budget.
COUNT_ABOVE = 0.8
MIN_BUDGET = 256
_MAX_CONTEXT = (r"maximum context length is (\d+)", r"context (?:limit|window|length) (?:is |of )?(\d+)",
                r"\d+ \+ \d+ > (\d+)", r"tokens? > (\d+) maximum")
_PROMPT = (r"(\d+) in the messages", r"has (\d+) input tokens", r"prompt is too long: (\d+) tokens",
           r"(\d+) \+ \d+ > \d+", r"resulted in (\d+) tokens", r"requested (\d+) tokens")


def window_text(window: ContextWindow, budget: int | None) -> str:
    """The window as the prompt shows it, without re-ask feedback (which follows it)."""
    saved = window.feedback
    window.feedback = []
    try:
        return window.render(budget)
    finally:
        window.feedback = saved


def fitted_budget(client: LLMClient, window: ContextWindow, budget: int | None) -> tuple[int | None, str]:
    """The budget to render with so that the window's real token count is within `budget`, and a note."""
    if budget is None:
        return None, ""
    text = window_text(window, budget)
    if estimate_tokens(text) <= COUNT_ABOVE * budget:
        return budget, ""
    tokens, how = client.count_tokens(text)
    if tokens <= budget:
        return budget, ""
    fitted = max(MIN_BUDGET, budget * budget // tokens)
    return fitted, f"window of {tokens} tokens ({how}) over the budget of {budget}: rendered within {fitted}"


def _first(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return int(match.group(1))
    return None


def shrunk_budget(message: str, budget: int | None, max_tokens: int, window_tokens: int) -> int | None:
    """The window budget after a context-length error: smaller by the excess the server names (prompt +
    answer limit - context), with a tenth to spare, else half. None when no useful window would be left."""
    current = budget or window_tokens
    context, prompt = _first(_MAX_CONTEXT, message), _first(_PROMPT, message)
    if context and prompt:
        excess = prompt + max_tokens - context
        smaller = int((min(current, window_tokens) - max(excess, 0)) * 0.9)
    else:
        smaller = min(current, window_tokens) // 2
    return smaller if smaller >= MIN_BUDGET else None
