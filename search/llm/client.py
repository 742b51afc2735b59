"""One role's LLM client: sends a prompt, retries what can be retried, prices and records the call.

Failures are classified by search.llm.failures (the provider's error type first, then `x-should-retry`,
then the status). Transient ones are retried here, and only here (the SDKs' retries are off and the LLM
teams turn the engine's second try off), with exponential backoff or as long as the server asked
(`retry-after-ms`, `Retry-After` in seconds or as a date); each retry is counted in the call record.
Permanent ones (quota, bad key, unknown model, `x-should-retry: false`) raise at once with a message
naming the fix. A model that rejects this role's `temperature` (newer Claude models, OpenAI reasoning models) is
re-asked once without it, and the record says so; the role's later calls in the run leave it out, other roles
keep theirs (the run's TemperatureMemory, search.llm.temperature, says why); with strict temperatures the refusal
raises instead. Exceptions that are not provider failures (a TypeError from the SDK, say) are not caught: they
are bugs, not retries.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from search.llm.errors import ContextTooLong, LLMError
from search.llm.failures import Failure, classify
from search.llm.pricing import Price, charged_price, estimate_cost, load_prices
from search.llm.providers import Message, TextCallback, make_provider, prompt_text
from search.llm.records import CallRecord, Completion, CostMeter
from search.llm.settings import KEY_ENV, RoleSettings
from search.llm.streaming import StreamMemory
from search.llm.temperature import REASONING, REFUSED, TemperatureMemory, strict_error
from search.llm.tokens import estimate_tokens

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 60.0
HOSTED = ("anthropic", "openai")  # providers that bill; an openai-compatible server is usually local


class LLMClient:
    """Calls one role's model. Safe to share between threads (attempts in flight run in parallel):
    the SDK clients are, and a call keeps its state on the stack. `temperatures` is the run's memory of refused
    temperatures, shared by the run's clients (default: this client's own)."""

    def __init__(self, settings: RoleSettings, prices: dict[str, Price] | None = None,
                 meter: CostMeter | None = None, sleep: Callable[[float], None] = time.sleep,
                 temperatures: TemperatureMemory | None = None, streams: StreamMemory | None = None) -> None:
        self.settings = settings
        self.prices = load_prices() if prices is None else prices
        self.meter = meter
        self.sleep = sleep
        self.temperatures = TemperatureMemory() if temperatures is None else temperatures
        self.streams = StreamMemory() if streams is None else streams
        self.provider = make_provider(settings)

    def __repr__(self) -> str:
        return f"LLMClient({self.settings!r})"

    def complete(self, system: str, prompt: str | list[Message], on_text: TextCallback | None = None,
                 prompt_version: str = "", cached_prefix: str = "",
                 max_tokens: int | None = None) -> tuple[str, CallRecord]:
        """Send `system` + `prompt` (a user message, or a whole conversation) and return the text
        with its call record. `cached_prefix` starts the user message and is marked for the provider's
        prompt cache (the context window: re-asks and retries send it again). `max_tokens` replaces the role's
        answer limit for this call (a re-ask of a cut-off answer). Raises LLMError (permanent or after the last
        retry)."""
        settings = self.settings if max_tokens is None else replace(self.settings, max_tokens=max_tokens)
        if isinstance(prompt, str):
            content: Any = prompt
            if cached_prefix:
                content = [{"type": "text", "text": cached_prefix, "cache": True}, {"type": "text", "text": prompt}]
            messages: list[Message] = [{"role": "user", "content": content}]
        else:
            messages = list(prompt)
        held = 0.0
        if self.meter is not None:
            held = self.meter.reserve(self.worst_case_usd(system, messages, settings), f"this {settings.role} call")
        try:
            text, record = self._complete(settings, system, messages, on_text, prompt_version)
        except BaseException:
            if self.meter is not None:
                self.meter.settle(held)
            raise
        if self.meter is not None:
            self.meter.settle(held, record)
        return text, record

    def count_tokens(self, text: str) -> tuple[int, str]:
        """(tokens of `text`, how counted): the provider's counter where it has one (Anthropic's count_tokens,
        tiktoken for OpenAI's models when installed), else the code-aware estimate."""
        counted = self.provider.count(self.settings, text)
        if counted is not None:
            return counted, f"{self.settings.provider} counter"
        return estimate_tokens(text), "estimate"

    def worst_case_usd(self, system: str, messages: list[Message], settings: RoleSettings | None = None) -> float:
        """The most this call can cost: every input token at the dearer of the input and cache-write
        prices (a code-aware estimate of the prompt), and the whole answer limit with its reasoning headroom."""
        settings = settings or self.settings
        price = charged_price(settings.model, self.prices, settings.provider)
        if price is None:
            return 0.0
        tokens = estimate_tokens(prompt_text(system, messages))
        per_input = max(price.input, price.cache_write or 0.0)
        answer = settings.answer_limit
        return (tokens * per_input + answer * price.output) / 1_000_000

    def _complete(self, settings: RoleSettings, system: str, messages: list[Message], on_text: TextCallback | None,
                  prompt_version: str) -> tuple[str, CallRecord]:
        asked = settings
        notes: list[str] = []
        dropped = stream_note = ""
        refusal = self.temperatures.refused(settings) if settings.temperature is not None else None
        if settings.stream and (why := self.streams.refused(settings)) is not None:
            stream_note = f"not streamed: {settings.model} refused to stream earlier in this run ({why})"
            settings = replace(settings, stream=False)
            notes.append(stream_note)
        if settings.temperature is not None and settings.reasoning_effort:
            if self.temperatures.strict:  # thinking forbids the role's temperature, like a refusal
                raise strict_error(settings, settings.temperature,
                                   f"with reasoning effort {settings.reasoning_effort} it takes no temperature; "
                                   "or leave the reasoning effort out")
            settings, dropped = settings.without_temperature(), REASONING
            if on_text is not None:
                on_text(f"\n[{settings.model} thinks ({settings.reasoning_effort}): the {settings.role} agent's "
                        f"temperature {asked.temperature:g} is not sent]\n")
            notes.append(f"temperature {asked.temperature} not sent: reasoning effort "
                         f"{settings.reasoning_effort}" + (f" (thinking budget {settings.thinking_budget} tokens)"
                                                           if settings.thinking_budget else "")
                         + " takes none")
        elif refusal is not None:
            if self.temperatures.strict:  # a resumed run that turned strict: the refusal is on record
                raise strict_error(settings, refusal.requested, refusal.reason)
            settings, dropped = settings.without_temperature(), REFUSED
            notes.append(f"temperature {refusal.requested:g} not sent: {settings.model} refused it for the "
                         f"{settings.role} agent earlier in this run ({refusal.reason})")
        retries = 0
        started = time.monotonic()
        while True:
            try:
                completion = self.provider.send(settings, system, messages, on_text)
                break
            except self.provider.failures as exc:
                failure = self._classify(exc)
                if failure.kind == "temperature" and settings.temperature is not None:
                    if self.temperatures.strict:
                        raise strict_error(settings, settings.temperature, failure.message[:300],
                                           failure.status) from exc
                    self.temperatures.refuse(settings, failure.message[:400])
                    notes.append(f"{settings.model} rejected temperature {settings.temperature:g} for the "
                                 f"{settings.role} agent ({failure.message[:400]}); re-sent without it, and the "
                                 f"{settings.role} agent's later calls in this run leave it out")
                    log.warning("%s: %s rejected temperature %s; re-sending without it", settings.role,
                                settings.model, settings.temperature)
                    if on_text is not None:
                        on_text(f"\n[{settings.model} does not accept the {settings.role} agent's temperature "
                                f"{settings.temperature:g}; re-sent without one]\n")
                    settings, dropped = settings.without_temperature(), REFUSED
                    continue
                if failure.kind == "stream" and settings.stream:
                    stream_note = (f"{failure.message}; re-sent without streaming, and this run's later calls to "
                                   f"{settings.model} are not streamed (--no-stream asks for none)")
                    notes.append(stream_note)
                    if self.streams.refuse(settings, failure.message[:300]):
                        log.warning("%s refused to stream %s; sending without streaming", settings.provider,
                                    settings.model)
                    if on_text is not None:
                        on_text(f"\n[{settings.model} cannot be streamed here; re-sent without streaming]\n")
                    settings = replace(settings, stream=False)
                    continue
                if failure.kind == "context":
                    raise ContextTooLong(failure.message, status=failure.status) from exc
                if failure.permanent:
                    raise LLMError(failure.message, permanent=True, status=failure.status,
                                   kind=failure.kind) from exc
                if retries >= settings.max_retries:
                    raise LLMError(f"{failure.message} (gave up after {retries} retries)", permanent=False,
                                   status=failure.status) from exc
                delay = self._backoff(retries, failure.retry_after_s)
                log.info("%s call to %s failed (%s); retry %d in %.1fs", settings.role, settings.model,
                         failure.message, retries + 1, delay)
                notes.append(f"retry {retries + 1}: {failure.message}")
                if on_text is not None:
                    on_text(f"\n[retrying: {failure.message}]\n")
                self.sleep(delay)
                retries += 1
        record = self._record(settings, completion, time.monotonic() - started, retries, notes, prompt_version)
        record.temperature_requested = asked.temperature
        record.stream_requested, record.stream_note = asked.stream, stream_note
        if dropped:
            record.temperature_dropped = dropped
            record.temperature_note = next((n for n in notes if "temperature" in n), "")
        return completion.text, record

    def _backoff(self, retries: int, retry_after_s: float | None) -> float:
        """Exponential backoff with jitter, capped at MAX_BACKOFF_S; a server's own wait wins when longer."""
        delay = min(self.settings.retry_base_s * (2 ** retries) * random.uniform(0.75, 1.25), MAX_BACKOFF_S)
        return delay if retry_after_s is None else max(delay, retry_after_s)

    def _classify(self, exc: BaseException) -> Failure:
        s = self.settings
        where = f"{s.provider}" + (f" at {s.base_url}" if s.base_url else "")
        key_hint = s.key_source if s.key_source.isupper() else KEY_ENV[s.provider]  # a variable's name
        failure = classify(exc, self.provider.errors, s.provider, where, s.timeout_s, key_hint, s.model)
        if failure is None:  # not a provider failure: never reached for the types send() raises
            raise exc
        return failure

    def _record(self, settings: RoleSettings, completion: Completion, latency: float, retries: int,
                notes: list[str], prompt_version: str) -> CallRecord:
        price = charged_price(settings.model, self.prices, settings.provider)
        if not completion.usage_reported:
            notes.append("server reported no usage; tokens estimated from the text")
        if price is None and settings.provider in HOSTED:
            notes.append(f"no price known for {settings.model}: counted as $0 (give one with --price)")
        elif price is not None and price.assumed:
            notes.append(f"price of {settings.model} assumed ({price.describe()}; {price.source}): give the real "
                         "one with --price")
        record = CallRecord(
            role=settings.role, provider=settings.provider, model=settings.model,
            temperature=settings.temperature, temperature_requested=self.settings.temperature,
            input_tokens=completion.input_tokens, output_tokens=completion.output_tokens,
            cache_read_tokens=completion.cache_read_tokens, cache_write_tokens=completion.cache_write_tokens,
            cost_usd=estimate_cost(price, completion.input_tokens, completion.output_tokens,
                                   completion.cache_read_tokens, completion.cache_write_tokens),
            price_known=price is not None and not price.assumed, latency_s=round(latency, 3), retries=retries,
            streamed=settings.stream, prompt_version=prompt_version, stop_reason=completion.stop_reason,
            notes=notes, reasoning_tokens=completion.reasoning_tokens, max_tokens_sent=settings.answer_limit)
        return record
