"""What a failed provider call means: classified by the provider's error type (the body), then its headers,
then the HTTP status, so that a retry is made only where it can help.

- transient (retried with backoff): overloaded/api/rate-limit/timeout errors, also inside a 200 stream (an
  Anthropic SSE `event: error`), 408/409/425/429/5xx, timeouts, dropped connections, unreadable answers, and
  anything the server marks `x-should-retry: true`.
- quota (permanent): out of credits or quota (OpenAI `insufficient_quota`, billing errors, Anthropic's
  "credit balance is too low"); retrying cannot help until someone pays.
- permanent: `x-should-retry: false`, 401/403/404 and other 4xx, a server asking to wait longer than
  MAX_RETRY_AFTER_S.
- context: the prompt plus the answer limit exceed the model's context (the agent shrinks its window once).
- temperature: the model does not take a temperature (re-sent without one).
- stream: the server refuses to stream this model (OpenAI's 400 "Your organization must be verified to stream this
  model", a server without streaming): the same call is sent again without streaming.
An exception that is none of these (a TypeError from a wrong SDK call, say) is not classified: it is a crash.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from dataclasses import dataclass
from typing import Any

RETRYABLE_STATUS = {408, 409, 425, 429, 500, 502, 503, 504, 529}
TRANSIENT_TYPES = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error", "server_error",
                   "internal_error", "service_unavailable"}
QUOTA_TYPES = {"insufficient_quota", "billing_error", "billing_hard_limit_reached", "billing_not_active",
               "quota_exceeded", "payment_required"}
# Not a bare "billing": OpenAI's ordinary rate-limit message suggests "adding a payment method ... /billing".
QUOTA_RE = re.compile(r"credit balance|insufficient[_ ]quota|exceeded your current quota|billing[_ ]hard[_ ]limit|"
                      r"billing (is )?not active", re.IGNORECASE)
CONTEXT_RE = re.compile(
    r"context[_ ]length|maximum context|context window|prompt is too long|too many (input )?tokens|"
    r"exceeds? (the )?(model'?s? )?context|input length and `?max_tokens`? exceed", re.IGNORECASE)
# A refusal to stream (not a failure of the stream): OpenAI answers 400 with param "stream" to unverified organisations.
STREAM_RE = re.compile(r"(verified|verify|allowed|permitted|access) to stream|stream(ing)? (is |are )?(not |un)"
                       r"(supported|available|allowed|enabled)|does not support stream|cannot stream|"
                       r"unsupported[^.]{0,40}\bstream", re.IGNORECASE)
BILLING_PAGE = {"anthropic": "https://console.anthropic.com/settings/billing",
                "openai": "https://platform.openai.com/settings/organization/billing"}
# Waits longer than this are not sat out: the run stops and says when to try again.
MAX_RETRY_AFTER_S = 300.0


class UnreadableStream(Exception):
    """A stream ended without a single event; retried like any unreadable answer."""


# An answer that is not what the API speaks (a proxy's HTML page with a JSON content type, an empty
# stream): the SDKs raise these rather than their own errors.
ANSWER_ERRORS: tuple[type[Exception], ...] = (UnreadableStream, json.JSONDecodeError)


@dataclass(frozen=True)
class Failure:
    kind: str  # "transient" | "quota" | "permanent" | "context" | "temperature" | "stream"
    message: str
    status: int | None = None
    retry_after_s: float | None = None

    @property
    def permanent(self) -> bool:
        return self.kind != "transient"


def _headers(exc: BaseException) -> Any:
    return getattr(getattr(exc, "response", None), "headers", None) or {}


def retry_after(headers: Any, now: float | None = None) -> float | None:
    """Seconds the server asked to wait: `retry-after-ms`, `retry-after` in seconds or as an HTTP date."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except (TypeError, ValueError):
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        parsed = email.utils.parsedate_tz(str(value))
        return None if parsed is None else max(0.0, email.utils.mktime_tz(parsed) - (now or time.time()))
    except (TypeError, ValueError, OverflowError):
        return None


def error_fields(exc: BaseException) -> tuple[str, str, str]:
    """(error type, error code, message) from the body in either vendor's shape."""
    body = getattr(exc, "body", None)
    error: Any = body
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
    if not isinstance(error, dict):
        return "", "", str(getattr(exc, "message", None) or exc)
    message = error.get("message") or getattr(exc, "message", None) or exc
    return str(error.get("type") or ""), str(error.get("code") or ""), str(message)


def error_param(exc: BaseException) -> str:
    """The body's `param` (OpenAI names the refused parameter there), or ""."""
    body = getattr(exc, "body", None)
    error = body.get("error") if isinstance(body, dict) and isinstance(body.get("error"), dict) else body
    return str(error.get("param") or "") if isinstance(error, dict) else ""


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def classify(exc: BaseException, errors: Any, provider: str, where: str, timeout_s: float,
             key_hint: str, model: str) -> Failure | None:
    """The failure `exc` of a call to `where`, or None when it is not a provider failure (a crash)."""
    if not isinstance(exc, (errors.APIError, *ANSWER_ERRORS)):
        return None
    status = _status(exc)
    etype, code, text = error_fields(exc)
    detail = text[:300]
    headers = _headers(exc)
    should_retry = str(headers.get("x-should-retry") or "").lower()
    wait = retry_after(headers)
    midstream = status == 200 or (status is None and bool(etype))
    shown = f"{status}" if status and status != 200 else "mid-stream error"
    kinds = {etype, code}
    if kinds & QUOTA_TYPES or (status in (400, 402, 403, 429) and QUOTA_RE.search(text)):
        page = BILLING_PAGE.get(provider, "the provider's billing page")
        return Failure("quota", f"{where} refused: the account is out of credits or quota ({shown}: {detail}); "
                                f"add credits or raise the quota at {page}, or use another --provider/--model",
                       status)
    if should_retry == "false":
        return Failure("permanent", f"{where} answered {shown} and asked not to retry (x-should-retry: false): "
                                    f"{detail}; wait for the limit to reset or raise it in the provider's console",
                       status)
    if (status in (400, 413, 422) or midstream) and CONTEXT_RE.search(text):
        return Failure("context", f"{where}: the prompt does not fit {model}'s context ({shown}: {detail})", status)
    if status in (400, 403, 422) and (STREAM_RE.search(text) or error_param(exc) == "stream"
                                      and "stream" in text.lower()):
        return Failure("stream", f"{where} refused to stream {model} ({shown}: {detail})", status)
    if status in (400, 422) and "temperature" in text.lower():
        return Failure("temperature", f"{where} refused the temperature ({shown}: {detail})", status)
    if wait is not None and wait > MAX_RETRY_AFTER_S:
        return Failure("permanent", f"{where} answered {shown} and asks to wait {wait:.0f} s before retrying "
                                    f"({detail}); try again later", status, wait)
    if kinds & TRANSIENT_TYPES or should_retry == "true" or (status is not None and status != 200 and (
            status in RETRYABLE_STATUS or status >= 500)):
        return Failure("transient", f"{where} answered {shown}" + (f" ({etype})" if etype else "") + f": {detail}",
                       status, wait)
    if isinstance(exc, errors.APITimeoutError):
        return Failure("transient", f"{where} did not answer within {timeout_s:g}s")
    if isinstance(exc, errors.APIConnectionError):
        return Failure("transient", f"cannot reach {where}: {detail}")
    if status is None and not etype or isinstance(exc, (*ANSWER_ERRORS, errors.APIResponseValidationError)):
        return Failure("transient", f"unreadable answer from {where}: {type(exc).__name__}: {detail}")
    if status == 401:
        return Failure("permanent", f"{where} rejected the API key (401: {detail}); set {key_hint} to a valid key",
                       status)
    if status == 403:
        return Failure("permanent", f"{where} refused access (403: {detail}); check the key's permissions for "
                                    f"{model}", status)
    if status == 404:
        return Failure("permanent", f"{where} has no model {model!r} (404: {detail}); check --model "
                                    "(and --base-url for a local server)", status)
    return Failure("permanent", f"{where} refused the request ({shown}" + (f", {etype}" if etype else "")
                   + f": {detail})", status)
