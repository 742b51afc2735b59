"""A local stand-in for the Anthropic and OpenAI HTTP APIs, so tests drive the real SDKs.

Speaks `POST /v1/messages` (Anthropic Messages, plain and SSE), `POST /v1/messages/count_tokens` and
`POST /v1/chat/completions` (OpenAI chat, plain and SSE with usage), records every request (path, headers,
JSON body, the credential) and answers from a script of `Reply` objects, then from a `responder(request) ->
Reply` callable. Errors come in the vendors' shapes (types and codes in the body, headers such as
`x-should-retry`, failures inside a 200 stream), and prompt caching is simulated as each vendor does it.
Run it on its own with `python tests/llm/stub_server.py [--kernel-responder] [--port N]`
(prints its base URL) to point `python -m search run` at it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

# What a server that will not stream a model answers (400): OpenAI's to unverified organisations, a gateway's.
REFUSED_STREAM = {
    "openai": "Your organization must be verified to stream this model. Please go to: "
              "https://platform.openai.com/settings/organization/general and click on Verify Organization.",
    "anthropic": "streaming is not supported by this gateway",
}
# What each vendor answers (400) to a temperature the model does not take.
REJECTED_TEMPERATURE = {
    "anthropic": "temperature is not supported for this model (got {})",
    "openai": "Unsupported value: 'temperature' does not support {} with this model. Only the default (1) value "
              "is supported.",
}


@dataclass
class Reply:
    """One scripted answer: text (with usage), an HTTP error, a delay, or a raw malformed body."""

    text: str = "ok"
    status: int = 200
    error_message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw_body: bytes | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0  # set by the server's prompt-cache simulation unless cache_read_tokens is given
    chunk_chars: int = 16
    truncated: bool = False  # stop_reason "max_tokens" (Anthropic) / finish_reason "length" (OpenAI)
    error_type: str | None = None  # the body's error type (default: the vendor's type for the status)
    error_code: str | None = None  # OpenAI's `code` (e.g. insufficient_quota)
    error_param: str | None = None  # OpenAI's `param` (the refused parameter, e.g. "stream")
    # A streamed answer that fails after this many text chunks with an error *inside* the 200 stream
    # (Anthropic `event: error`, OpenAI `data: {"error": ...}`), as the vendors do when they overload.
    stream_error_after: int | None = None
    reasoning_tokens: int = 0  # hidden reasoning (OpenAI completion_tokens_details) / thinking (Anthropic)


@dataclass
class RecordedRequest:
    """What the server received: the API path, headers (lower-cased names) and JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def api(self) -> str:
        return "anthropic" if self.path.endswith("/messages") else "openai"

    @property
    def text(self) -> str:
        """All prompt text of the request (system and messages), for responders to inspect."""
        parts: list[str] = []
        system = self.body.get("system")
        if isinstance(system, str):
            parts.append(system)
        elif isinstance(system, list):
            parts.extend(block.get("text", "") for block in system)
        for message in self.body.get("messages", []):
            content = message.get("content")
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):
                parts.extend(block.get("text", "") for block in content)
        return "\n".join(parts)

    @property
    def temperature(self) -> float | None:
        return self.body.get("temperature")

    @property
    def credential(self) -> str | None:
        """The API key the client sent (x-api-key for Anthropic, bearer token for OpenAI)."""
        if "x-api-key" in self.headers:
            return self.headers["x-api-key"]
        auth = self.headers.get("authorization", "")
        return auth.removeprefix("Bearer ") or None


def _tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _counted_tokens(text: str) -> int:
    """What the stub's count_tokens answers: a tokenizer denser than four characters a token, like a real
    one on code."""
    return max(1, len(text) // 3)


class StubLLMServer:
    """A threaded HTTP server; use as a context manager or call start()/stop()."""

    def __init__(self, responder: Callable[[RecordedRequest], Reply] | None = None,
                 host: str = "127.0.0.1", port: int = 0, required_key: str | None = None,
                 reject_temperature: Callable[[float], bool] | None = None, refuse_stream: bool = False) -> None:
        self.responder = responder or (lambda request: Reply())
        self.required_key = required_key  # when set, any other credential gets a 401 like the real APIs
        # When set, a request whose temperature it holds true for gets the vendor's 400 (a model that takes no
        # temperature, or only some values): `lambda t: True` refuses every temperature, `lambda t: t > 0.5` 0.8.
        self.reject_temperature = reject_temperature
        self.refuse_stream = refuse_stream  # when set, a streamed request gets the vendor's 400 (REFUSED_STREAM)
        self.script: list[Reply] = []
        self.requests: list[RecordedRequest] = []
        self.cached_prefixes: set[str] = set()
        self.count_requests: list[RecordedRequest] = []  # /v1/messages/count_tokens, not in `requests`
        self.prompts_seen: list[str] = []
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def push(self, *replies: Reply) -> None:
        """Queue replies to be sent, in order, before the responder is consulted."""
        with self._lock:
            self.script.extend(replies)

    def start(self) -> StubLLMServer:
        # a short poll: shutdown() waits up to one poll interval (0.5 s by default) for the loop to notice
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> StubLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _next_reply(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self.required_key is not None and request.credential != self.required_key:
                return Reply(status=401, error_message="invalid x-api-key")
            if self.refuse_stream and request.body.get("stream"):
                return Reply(status=400, error_message=REFUSED_STREAM[request.api], error_type="invalid_request_error",
                             error_code="unsupported_value", error_param="stream")
            temperature = request.temperature
            if temperature is not None and self.reject_temperature is not None and self.reject_temperature(temperature):
                return Reply(status=400, error_message=REJECTED_TEMPERATURE[request.api].format(temperature))
            reply = self.script.pop(0) if self.script else None
        reply = reply or self.responder(request)
        if reply.status == 200 and not reply.cache_read_tokens:
            read, write = self._cache(request)
            reply = dataclasses.replace(reply, cache_read_tokens=read, cache_write_tokens=write)
        return reply

    def _cache(self, request: RecordedRequest) -> tuple[int, int]:
        """Prompt caching as the vendors do it, in tokens (read, written). Anthropic: the prefix up to the
        last block marked `cache_control` is read when an earlier request wrote the same prefix, else
        written. OpenAI: the longest prefix shared with an earlier prompt is read, in steps of 128
        tokens from 1,024 (automatic, no markers)."""
        if request.api == "anthropic":
            prefix = _cached_prefix(request.body)
            if not prefix:
                return 0, 0
            with self._lock:
                seen = prefix in self.cached_prefixes
                self.cached_prefixes.add(prefix)
            return (_tokens(prefix), 0) if seen else (0, _tokens(prefix))
        text = request.text
        with self._lock:
            shared = max((len(os.path.commonprefix([text, old])) for old in self.prompts_seen), default=0)
            self.prompts_seen.append(text)
        tokens = _tokens(text[:shared]) if shared else 0
        return (tokens // 128 * 128 if tokens >= 1024 else 0), 0

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = RecordedRequest(self.path, headers, body)
                if self.path.endswith("/messages/count_tokens"):  # Anthropic's free counter
                    with server._lock:
                        server.count_requests.append(request)
                    self._send_json(200, {"input_tokens": _counted_tokens(request.text)})
                    return
                if not (self.path.endswith("/messages") or self.path.endswith("/chat/completions")):
                    self._send_json(404, {"error": {"message": f"no route {self.path}"}})
                    return
                reply = server._next_reply(request)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # client gave up
                    self._answer(request, reply)

            def _answer(self, request: RecordedRequest, reply: Reply) -> None:
                if reply.raw_body is not None:
                    self._send(reply.status, reply.raw_body, "application/json", reply.headers)
                elif reply.status != 200:
                    self._send_json(reply.status, self._error_body(request, reply), reply.headers)
                elif request.body.get("stream"):
                    self._stream(request, reply)
                elif request.api == "anthropic":
                    self._send_json(200, _anthropic_message(request, reply), reply.headers)
                else:
                    self._send_json(200, _openai_completion(request, reply), reply.headers)

            def _error_body(self, request: RecordedRequest, reply: Reply) -> dict[str, Any]:
                return _error_body(request, reply)

            def _send_json(self, status: int, obj: Any, headers: dict[str, str] | None = None) -> None:
                self._send(status, json.dumps(obj).encode(), "application/json", headers or {})

            def _send(self, status: int, data: bytes, ctype: str, headers: dict[str, str]) -> None:
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, request: RecordedRequest, reply: Reply) -> None:
                events = (_anthropic_events if request.api == "anthropic" else _openai_events)(request, reply)
                data = "".join(events).encode()
                self._send(200, data, "text/event-stream", reply.headers)

        return Handler


def _cached_prefix(body: dict[str, Any]) -> str:
    """The text up to and including the last block marked cache_control (system blocks, then messages)."""
    blocks: list[dict[str, Any]] = list(body.get("system") or []) if isinstance(body.get("system"), list) else []
    for message in body.get("messages", []):
        content = message.get("content")
        blocks.extend(content if isinstance(content, list) else [{"type": "text", "text": content or ""}])
    marked = [k for k, block in enumerate(blocks) if block.get("cache_control")]
    return "\x00".join(str(block.get("text", "")) for block in blocks[:marked[-1] + 1]) if marked else ""


def _error_body(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    """The vendor's error shape: Anthropic {type: error, error: {type, message}}, OpenAI {error: {message,
    type, code}}; a mid-stream error (status 200) defaults to Anthropic's overloaded_error."""
    message = reply.error_message or f"stub error {reply.status}"
    if request.api == "anthropic":
        kind = reply.error_type or ANTHROPIC_ERROR_TYPES.get(reply.status if reply.status != 200 else 529, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": reply.error_type or "stub_error",
                      "param": reply.error_param,
                      "code": reply.error_code if reply.error_code is not None else reply.status}}


def _usage(request: RecordedRequest, reply: Reply) -> tuple[int, int]:
    tokens_in = reply.input_tokens if reply.input_tokens is not None else _tokens(request.text)
    tokens_out = reply.output_tokens if reply.output_tokens is not None else _tokens(reply.text)
    return tokens_in, tokens_out


def _chunks(reply: Reply) -> list[str]:
    n = max(1, reply.chunk_chars)
    return [reply.text[i:i + n] for i in range(0, len(reply.text), n)] or [""]


def _anthropic_message(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    tokens_in, tokens_out = _usage(request, reply)
    if reply.input_tokens is None:  # Anthropic's input_tokens counts only what was neither read nor written
        tokens_in = max(0, tokens_in - reply.cache_read_tokens - reply.cache_write_tokens)
    return {
        "id": "msg_stub", "type": "message", "role": "assistant",
        "model": request.body.get("model", "stub"),
        "content": [{"type": "text", "text": reply.text}],
        "stop_reason": "max_tokens" if reply.truncated else "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out + reply.reasoning_tokens,
                  "cache_read_input_tokens": reply.cache_read_tokens,
                  "cache_creation_input_tokens": reply.cache_write_tokens,
                  **({"output_tokens_details": {"thinking_tokens": reply.reasoning_tokens}}
                     if reply.reasoning_tokens else {})},
    }


def _sse(event: str | None, obj: Any) -> str:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj)}\n\n"


def _anthropic_events(request: RecordedRequest, reply: Reply) -> list[str]:
    tokens_in, tokens_out = _usage(request, reply)
    start = _anthropic_message(request, reply)
    start["content"], start["stop_reason"] = [], None
    start["usage"]["output_tokens"] = 1
    out = [_sse("message_start", {"type": "message_start", "message": start}),
           _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                        "content_block": {"type": "text", "text": ""}})]
    for k, piece in enumerate(_chunks(reply)):
        if k == reply.stream_error_after:
            return [*out, _sse("error", _error_body(request, reply))]
        out.append(_sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "text_delta", "text": piece}}))
    out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": 0}))
    out.append(_sse("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": "max_tokens" if reply.truncated else "end_turn",
                                                "stop_sequence": None},
                                      "usage": {"output_tokens": tokens_out + reply.reasoning_tokens,
                                                **({"output_tokens_details": {"thinking_tokens": reply.reasoning_tokens}}
                                                   if reply.reasoning_tokens else {})}}))
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return out


def _openai_usage(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    tokens_in, tokens_out = _usage(request, reply)
    return {"prompt_tokens": tokens_in, "completion_tokens": tokens_out + reply.reasoning_tokens,
            "total_tokens": tokens_in + tokens_out + reply.reasoning_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.cache_read_tokens},
            "completion_tokens_details": {"reasoning_tokens": reply.reasoning_tokens}}


def _openai_completion(request: RecordedRequest, reply: Reply) -> dict[str, Any]:
    return {
        "id": "chatcmpl-stub", "object": "chat.completion", "created": int(time.time()),
        "model": request.body.get("model", "stub"),
        "choices": [{"index": 0, "finish_reason": "length" if reply.truncated else "stop",
                     "message": {"role": "assistant", "content": reply.text}}],
        "usage": _openai_usage(request, reply),
    }


def _openai_events(request: RecordedRequest, reply: Reply) -> list[str]:
    base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": request.body.get("model", "stub")}
    out = []
    for i, piece in enumerate(_chunks(reply)):
        if i == reply.stream_error_after:
            return [*out, _sse(None, _error_body(request, reply))]
        delta = {"content": piece, **({"role": "assistant"} if i == 0 else {})}
        out.append(_sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}))
    finish = "length" if reply.truncated else "stop"
    out.append(_sse(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    if (request.body.get("stream_options") or {}).get("include_usage"):
        out.append(_sse(None, {**base, "choices": [], "usage": _openai_usage(request, reply)}))
    out.append("data: [DONE]\n\n")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kernel-responder", action="store_true",
                        help="answer plan/code/debug prompts with valid kernels (see kernel_responder.py)")
    parser.add_argument("--require-key", default=None, help="answer 401 to any other API key")
    parser.add_argument("--reject-temperature-above", type=float, default=None, metavar="T",
                        help="answer 400 to any temperature above T, as a model that takes none or only some does "
                             "(-1: every temperature)")
    args = parser.parse_args()
    responder = None
    if args.kernel_responder:
        import sys
        from pathlib import Path

        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.llm.kernel_responder import kernel_responder

        responder = kernel_responder
    above = args.reject_temperature_above
    server = StubLLMServer(responder, port=args.port, required_key=args.require_key,
                           reject_temperature=None if above is None else (lambda t: t > above)).start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
