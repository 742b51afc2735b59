"""The two wire protocols, through the official SDKs: Anthropic Messages and OpenAI chat completions
(OpenAI itself, or any OpenAI-compatible server such as vLLM, SGLang, Ollama, llama.cpp).

A provider sends one request and returns a `Completion`, streaming text to `on_text` as it
arrives; it raises the SDK's own exceptions (those in `failures`), which `search.llm.failures` classifies and
`search.llm.client` retries. The SDKs' built-in retries are off (max_retries=0): one loop, the client's,
retries both HTTP errors (the SDKs cannot tell a quota 429 from a rate-limit 429: the type is in the body)
and failures inside a stream (which the SDKs never retry), and counts each retry in the call record.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import re
from collections.abc import Callable
from typing import Any

from search.llm.failures import ANSWER_ERRORS, UnreadableStream
from search.llm.records import Completion
from search.llm.settings import RoleSettings
from search.llm.tokens import count_tokens, estimate_tokens

log = logging.getLogger(__name__)

# A host that does not answer costs this, not the whole read timeout, per attempt.
CONNECT_TIMEOUT_S = 10.0
TextCallback = Callable[[str], None]
# {"role": ..., "content": str | [{"type": "text", "text": str, "cache": bool}, ...]}: a part marked `cache`
# ends a prefix shared by later calls (the context window, which re-asks send again).
Message = dict[str, Any]


def flat(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


def prompt_text(system: str, messages: list[Message]) -> str:
    """All the text of a request, for token estimates."""
    return system + "".join(flat(m["content"]) for m in messages)


# Anthropic's adaptive thinking takes an effort instead of a budget (output_config.effort has no "minimal").
ANTHROPIC_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "max"}
_CLAUDE_VERSION = re.compile(r"^claude-[a-z]+-(\d{1,2})(?:-(\d{1,2}))?(?:-\d{8})?$")


def adaptive_thinking(model: str) -> bool:
    """Whether `model` takes `thinking: {type: adaptive}`: those the installed SDK warns about for `enabled`
    (MODELS_TO_WARN_WITH_THINKING_ENABLED), and Claude 4.6 and later; older models get a budget (`enabled`)."""
    try:
        from anthropic._data import MODELS_TO_WARN_WITH_THINKING_ENABLED as warned
    except ImportError:
        warned = ()
    if model in warned:
        return True
    match = _CLAUDE_VERSION.match(model)
    return match is not None and (int(match.group(1)), int(match.group(2) or 0)) >= (4, 6)


@functools.cache
def _parameters(func: Any) -> frozenset[str]:
    try:
        return frozenset(inspect.signature(func).parameters)
    except (TypeError, ValueError):
        return frozenset()


def typed(create: Any, kwargs: dict[str, Any], extra: dict[str, Any], name: str, value: Any) -> None:
    """Pass `name` as the SDK method's own (typed) parameter where the installed SDK has it, else as a body field
    (SDKs older than the parameter, down to pyproject's floor versions)."""
    (kwargs if name in _parameters(getattr(create, "__func__", create)) else extra)[name] = value


def anthropic_messages(messages: list[Message], caching: bool) -> list[dict[str, Any]]:
    """Parts marked `cache` become text blocks with `cache_control` (when caching is on)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if not isinstance(content, str):
            blocks = []
            for part in content:
                block: dict[str, Any] = {"type": "text", "text": part["text"]}
                if caching and part.get("cache"):
                    block["cache_control"] = {"type": "ephemeral"}
                blocks.append(block)
            content = blocks
        out.append({"role": message["role"], "content": content})
    return out


class AnthropicProvider:
    """Messages API. Temperature goes through `extra_body` (the 2.x SDK dropped the parameter);
    the stable system prompt and the context window (parts marked `cache`) are marked for prompt caching."""

    name = "anthropic"

    def __init__(self, settings: RoleSettings) -> None:
        import anthropic

        self.errors = anthropic
        self.failures: tuple[type[Exception], ...] = (anthropic.APIError, *ANSWER_ERRORS)
        self.client = anthropic.Anthropic(api_key=settings.api_key, base_url=settings.base_url,
                                          timeout=anthropic.Timeout(settings.timeout_s, connect=CONNECT_TIMEOUT_S),
                                          max_retries=0)

    def count(self, settings: RoleSettings, text: str) -> int | None:
        """Anthropic's own count of `text` as a user message (free; None where the endpoint lacks it)."""
        counter = getattr(self.client.messages, "count_tokens", None)  # SDKs before 0.47 had it in beta only
        if counter is None:
            return None
        try:
            result = counter(model=settings.model, messages=[{"role": "user", "content": text}])
        except self.failures as exc:
            log.info("count_tokens unavailable for %s (%s); estimating", settings.model, exc)
            return None
        return int(result.input_tokens)

    def send(self, settings: RoleSettings, system: str, messages: list[Message],
             on_text: TextCallback | None) -> Completion:
        block: dict[str, Any] = {"type": "text", "text": system}
        if settings.prompt_caching:
            block["cache_control"] = {"type": "ephemeral"}
        kwargs: dict[str, Any] = {"model": settings.model, "max_tokens": settings.answer_limit,
                                  "system": [block], "messages": anthropic_messages(messages, settings.prompt_caching)}
        extra: dict[str, Any] = {}
        if settings.temperature is not None:  # not a parameter of the 2.x SDK: a body field (docs/llm.md)
            extra["temperature"] = settings.temperature
        if settings.thinking_budget:  # thinking counts in max_tokens: answer_limit adds it to the answer's own limit
            create = self.client.messages.create
            if adaptive_thinking(settings.model):
                typed(create, kwargs, extra, "thinking", {"type": "adaptive"})
                typed(create, kwargs, extra, "output_config", {"effort": ANTHROPIC_EFFORT[settings.reasoning_effort or "medium"]})
            else:
                typed(create, kwargs, extra, "thinking", {"type": "enabled", "budget_tokens": settings.thinking_budget})
        if extra:  # body fields, so that SDKs older than the parameters send them too
            kwargs["extra_body"] = extra
        if settings.stream:
            events = 0
            with self.client.messages.stream(**kwargs) as stream:
                for event in stream:
                    events += 1
                    delta = getattr(event, "delta", None)
                    if (event.type == "content_block_delta" and delta is not None
                            and getattr(delta, "type", "") == "text_delta" and on_text is not None and delta.text):
                        on_text(delta.text)
                if events == 0:  # e.g. a proxy answering HTML: the SDK yields nothing rather than failing
                    raise UnreadableStream("the streamed answer held no event (not server-sent events?)")
                message = stream.get_final_message()
        else:
            message = self.client.messages.create(**kwargs)
        text = "".join(getattr(b, "text", "") for b in message.content if getattr(b, "type", "") == "text")
        if on_text is not None and not settings.stream and text:
            on_text(text)
        usage = message.usage
        cache_read = getattr(usage, "cache_read_input_tokens", None) or 0
        cache_write = getattr(usage, "cache_creation_input_tokens", None) or 0
        thinking = getattr(getattr(usage, "output_tokens_details", None), "thinking_tokens", None)
        if thinking is None and settings.thinking_budget:  # an SDK or server without the count: estimate the blocks
            thought = "".join(getattr(b, "thinking", "") or "" for b in message.content
                              if getattr(b, "type", "") == "thinking")
            thinking = estimate_tokens(thought) if thought else 0
        return Completion(text=text, input_tokens=(usage.input_tokens or 0) + cache_read + cache_write,
                          output_tokens=usage.output_tokens or 0, cache_read_tokens=cache_read,
                          cache_write_tokens=cache_write, stop_reason=message.stop_reason,
                          reasoning_tokens=int(thinking or 0))


class OpenAIProvider:
    """Chat completions, for api.openai.com (`openai`) or any server at a base URL (`openai-compatible`)."""

    def __init__(self, settings: RoleSettings) -> None:
        import openai

        self.name = settings.provider
        self.errors = openai
        self.failures: tuple[type[Exception], ...] = (openai.APIError, *ANSWER_ERRORS)
        self.client = openai.OpenAI(api_key=settings.api_key, base_url=settings.base_url,
                                    timeout=openai.Timeout(settings.timeout_s, connect=CONNECT_TIMEOUT_S),
                                    max_retries=0)

    def count(self, settings: RoleSettings, text: str) -> int | None:
        """tiktoken's count for OpenAI's own models when it is installed with its encodings, else None."""
        if self.name != "openai":
            return None
        tokens, how = count_tokens(text, settings.model, openai_model=True)
        return tokens if how == "tiktoken" else None

    def send(self, settings: RoleSettings, system: str, messages: list[Message],
             on_text: TextCallback | None) -> Completion:
        kwargs: dict[str, Any] = {"model": settings.model,
                                  "messages": [{"role": "system", "content": system},
                                               *({"role": m["role"], "content": flat(m["content"])} for m in messages)]}
        # api.openai.com wants max_completion_tokens (reasoning models reject max_tokens);
        # local servers (Ollama, llama.cpp, older vLLM) only know max_tokens.
        # Both count a reasoning model's hidden reasoning: answer_limit adds headroom for it.
        if self.name == "openai":
            kwargs["max_completion_tokens"] = settings.answer_limit
        else:
            kwargs["max_tokens"] = settings.answer_limit
        if settings.temperature is not None:
            kwargs["temperature"] = settings.temperature
        extra: dict[str, Any] = {}  # body fields, so that SDKs older than the parameters send them too
        create = self.client.chat.completions.create
        if self.name == "openai" and settings.prompt_caching:
            # OpenAI caches long prefixes by itself (the system prompt, then the context window); a key per
            # system prompt routes calls to the same cache.
            typed(create, kwargs, extra, "prompt_cache_key",
                  "stark-" + hashlib.sha256(system.encode()).hexdigest()[:24])
        if settings.reasoning_effort:
            typed(create, kwargs, extra, "reasoning_effort", settings.reasoning_effort)
        if extra:
            kwargs["extra_body"] = extra
        if settings.stream:
            return self._stream(kwargs, system, messages, on_text)
        response = self.client.chat.completions.create(**kwargs)
        choice = response.choices[0] if response.choices else None
        text = (choice.message.content or "") if choice else ""
        if on_text is not None and text:
            on_text(text)
        return self._completion(text, response.usage, system, messages,
                                choice.finish_reason if choice else None)

    def _stream(self, kwargs: dict[str, Any], system: str, messages: list[Message],
                on_text: TextCallback | None) -> Completion:
        pieces: list[str] = []
        usage = None
        finish = None
        chunks = 0
        stream = self.client.chat.completions.create(**kwargs, stream=True,
                                                     stream_options={"include_usage": True})
        with stream:
            for chunk in stream:
                chunks += 1
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices or []:
                    piece = choice.delta.content if choice.delta else None
                    if piece:
                        pieces.append(piece)
                        if on_text is not None:
                            on_text(piece)
                    finish = choice.finish_reason or finish
        if chunks == 0:  # e.g. a proxy answering HTML: the SDK yields nothing rather than failing
            raise UnreadableStream("the streamed answer held no chunk (not server-sent events?)")
        return self._completion("".join(pieces), usage, system, messages, finish)

    @staticmethod
    def _completion(text: str, usage: Any, system: str, messages: list[Message],
                    finish: str | None) -> Completion:
        if usage is None:  # some servers do not report usage: estimate so cost limits still bite
            return Completion(text=text, input_tokens=estimate_tokens(prompt_text(system, messages)),
                              output_tokens=estimate_tokens(text), stop_reason=finish, usage_reported=False)
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        reasoning = getattr(getattr(usage, "completion_tokens_details", None), "reasoning_tokens", None)
        return Completion(text=text, input_tokens=usage.prompt_tokens or 0,
                          output_tokens=usage.completion_tokens or 0, cache_read_tokens=cached,
                          stop_reason=finish, reasoning_tokens=int(reasoning or 0))


def make_provider(settings: RoleSettings) -> AnthropicProvider | OpenAIProvider:
    if settings.provider == "anthropic":
        return AnthropicProvider(settings)
    return OpenAIProvider(settings)
