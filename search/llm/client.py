"""One role's LLM client: sends a prompt, retries what can be retried, prices and records the call.

Retries (with exponential backoff, honouring Retry-After) cover 408/409/429/5xx, timeouts,
connection errors and unreadable answers. 400/401/403/404 and other client errors are
permanent: the run stops with a message naming the fix. A model that rejects `temperature`
(newer Claude models, OpenAI reasoning models) is re-asked once without it, and the record
says so; later calls to that model leave it out.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from search.llm.errors import LLMError
from search.llm.pricing import Price, estimate_cost, load_prices, price_for
from search.llm.providers import Message, TextCallback, make_provider
from search.llm.records import CallRecord, Completion, CostMeter
from search.llm.settings import KEY_ENV, RoleSettings

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
MAX_BACKOFF_S = 60.0

# (provider, base_url, model) of models that rejected a temperature, shared by all clients.
_NO_TEMPERATURE: set[tuple[str, str | None, str]] = set()
_NO_TEMPERATURE_LOCK = threading.Lock()


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get("retry-after")
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _error_text(exc: BaseException) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
    return str(getattr(exc, "message", None) or exc)


def rejects_temperature(exc: BaseException) -> bool:
    """A 400 whose message names temperature: the model does not take one (or not this value)."""
    return _status(exc) in (400, 422) and "temperature" in _error_text(exc).lower()


class LLMClient:
    """Calls one role's model. Safe to share between threads (attempts in flight run in parallel):
    the SDK clients are, and a call keeps its state on the stack."""

    def __init__(self, settings: RoleSettings, prices: dict[str, Price] | None = None,
                 meter: CostMeter | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        self.settings = settings
        self.prices = load_prices() if prices is None else prices
        self.meter = meter
        self.sleep = sleep
        self.provider = make_provider(settings)

    def __repr__(self) -> str:
        return f"LLMClient({self.settings!r})"

    def _model_key(self) -> tuple[str, str | None, str]:
        return (self.settings.provider, self.settings.base_url, self.settings.model)

    def complete(self, system: str, prompt: str | list[Message], on_text: TextCallback | None = None,
                 prompt_version: str = "") -> tuple[str, CallRecord]:
        """Send `system` + `prompt` (a user message, or a whole conversation) and return the text
        with its call record. Raises LLMError (permanent or after the last retry)."""
        if self.meter is not None:
            self.meter.check()
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        settings = self.settings
        notes: list[str] = []
        if settings.temperature is not None and self._model_key() in _NO_TEMPERATURE:
            settings = settings.without_temperature()
            notes.append(f"temperature {self.settings.temperature} not sent: {settings.model} rejects it")
        retries = 0
        started = time.monotonic()
        while True:
            try:
                completion = self.provider.send(settings, system, messages, on_text)
                break
            except Exception as exc:  # noqa: BLE001 - classified below, re-raised as LLMError
                if settings.temperature is not None and rejects_temperature(exc):
                    with _NO_TEMPERATURE_LOCK:
                        _NO_TEMPERATURE.add(self._model_key())
                    notes.append(f"{settings.model} rejected temperature {settings.temperature} "
                                 f"({_error_text(exc)[:160]}); re-sent without it")
                    log.warning("%s: %s rejected temperature; re-sending without it", settings.role, settings.model)
                    if on_text is not None:
                        on_text(f"\n[{settings.model} does not accept a temperature; re-sent without one]\n")
                    settings = settings.without_temperature()
                    continue
                permanent, message = self._classify(exc)
                if permanent:
                    raise LLMError(message, permanent=True, status=_status(exc)) from exc
                if retries >= settings.max_retries:
                    raise LLMError(f"{message} (gave up after {retries} retries)", permanent=False,
                                   status=_status(exc)) from exc
                delay = self._backoff(retries, _retry_after(exc))
                log.info("%s call to %s failed (%s); retry %d in %.1fs", settings.role, settings.model,
                         message, retries + 1, delay)
                notes.append(f"retry {retries + 1}: {message}")
                if on_text is not None:
                    on_text(f"\n[retrying: {message}]\n")
                self.sleep(delay)
                retries += 1
        return completion.text, self._record(settings, completion, time.monotonic() - started,
                                             retries, notes, prompt_version)

    def _backoff(self, retries: int, retry_after: float | None) -> float:
        delay = self.settings.retry_base_s * (2 ** retries) * random.uniform(0.75, 1.25)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, MAX_BACKOFF_S)

    def _classify(self, exc: BaseException) -> tuple[bool, str]:
        """(permanent?, message naming the problem and the fix)."""
        s = self.settings
        where = f"{s.provider}" + (f" at {s.base_url}" if s.base_url else "")
        status = _status(exc)
        detail = _error_text(exc)[:300]
        errors: Any = self.provider.errors
        if status is None:
            if isinstance(exc, errors.APITimeoutError):
                return False, f"{where} did not answer within {s.timeout_s:g}s"
            if isinstance(exc, errors.APIConnectionError):
                return False, f"cannot reach {where}: {detail}"
            return False, f"unreadable answer from {where}: {type(exc).__name__}: {detail}"
        if status in RETRYABLE_STATUS or status >= 500:
            return False, f"{where} answered {status}: {detail}"
        if status == 401:
            source = s.key_source if s.key_source.isupper() else KEY_ENV[s.provider]  # a variable's name
            return True, (f"{where} rejected the API key (401: {detail}); set {source} to a valid key")
        if status == 403:
            return True, f"{where} refused access (403: {detail}); check the key's permissions for {s.model}"
        if status == 404:
            return True, (f"{where} has no model {s.model!r} (404: {detail}); check --model "
                          "(and --base-url for a local server)")
        return True, f"{where} refused the request ({status}: {detail})"

    def _record(self, settings: RoleSettings, completion: Completion, latency: float, retries: int,
                notes: list[str], prompt_version: str) -> CallRecord:
        price = price_for(settings.model, self.prices)
        if not completion.usage_reported:
            notes.append("server reported no usage; tokens estimated from text length")
        record = CallRecord(
            role=settings.role, provider=settings.provider, model=settings.model,
            temperature=settings.temperature, temperature_requested=self.settings.temperature,
            input_tokens=completion.input_tokens, output_tokens=completion.output_tokens,
            cache_read_tokens=completion.cache_read_tokens, cache_write_tokens=completion.cache_write_tokens,
            cost_usd=estimate_cost(price, completion.input_tokens, completion.output_tokens,
                                   completion.cache_read_tokens, completion.cache_write_tokens),
            price_known=price is not None, latency_s=round(latency, 3), retries=retries,
            streamed=settings.stream, prompt_version=prompt_version, stop_reason=completion.stop_reason,
            notes=notes)
        if self.meter is not None:
            self.meter.add(record)
        return record
