"""The bundled endpoint's HTTP side: `GET /v1/models`, `GET /stats` and
`POST /v1/chat/completions` (streamed as server-sent events in chunked transfer encoding, or as
one JSON object), in the wire format the `openai` SDK parses, paced and with faults injected
as the shared state (agent/models/replay_state.py) says.

A stdlib `ThreadingHTTPServer`: one thread a connection, no dependency.
"""

from __future__ import annotations

import json
import logging
import math
import select
import socket
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ooda.agent.models.replay_behaviour import overflow_message
from ooda.agent.models.replay_state import Fault, ReplayState, UnknownTask, content_text

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4


def _tokens(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


class Handler(BaseHTTPRequestHandler):
    """One connection; `server.state` holds the shared state."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """TCP_NODELAY, as real inference servers set it: without it each small streamed chunk after
    the first waits for the client's delayed ACK (about 40 ms on Linux)."""
    server: HttpServer

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        log.debug("%s %s", self.address_string(), format % args)

    def setup(self) -> None:
        super().setup()
        with self.server.state.lock:
            self.server.state.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.state.lock:
            self.server.state.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    # ---------------------------------------------------------------- plumbing

    def _send_json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.server.state.count_status(status)  # before the client can see the answer
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(
        self, status: int, message: str, kind: str, headers: dict[str, str] | None = None,
        code: str | None = None,
    ) -> None:
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        self._send_json(status, body, headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _cut_connection(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

    def _authorised(self) -> bool:
        key = self.server.state.api_key
        if key is None or self.headers.get("Authorization", "") == f"Bearer {key}":
            return True
        headers = {"WWW-Authenticate": "Bearer"}
        self._send_error(401, "Incorrect API key provided.", "invalid_request_error", headers)
        return False

    # ---------------------------------------------------------------- routes

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        state = self.server.state
        with state.lock:
            state.requests += 1
        path = self.path.split("?")[0].rstrip("/")
        if path == "/stats":
            self._send_json(200, state.snapshot())
        elif path in ("/v1/models", "/models"):
            if self._authorised():
                data = [_listing(m, state) for m in state.models]
                self._send_json(200, {"object": "list", "data": data})
        else:
            self._send_error(404, f"no route {self.path}", "not_found")

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        state = self.server.state
        with state.lock:
            state.requests += 1
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        path = self.path.split("?")[0].rstrip("/")
        if path not in ("/v1/chat/completions", "/chat/completions"):
            self._send_error(404, f"no route {self.path}", "not_found")
            return
        if not self._authorised():
            return
        try:
            request = json.loads(raw or b"{}")
            messages = request["messages"]
            if not isinstance(messages, list):
                raise TypeError("messages must be a list")
        except (ValueError, KeyError, TypeError) as err:
            self._send_error(400, f"bad request body: {err}", "invalid_request_error")
            return
        if request.get("stream_options") is not None and not state.accept_stream_options:
            message = "Unrecognized request argument supplied: stream_options"
            self._send_error(400, message, "invalid_request_error")
            return
        state.log_request(str(request.get("model") or ""), messages)
        with state.lock:
            state.chat_requests += 1
            state.in_flight += 1
            state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            self._chat(request, messages)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        finally:
            with state.lock:
                state.in_flight -= 1

    def _chat(self, request: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        state = self.server.state
        asked = str(request.get("model") or "")
        if state.strict_models and asked not in state.models:  # as OpenAI and vLLM answer
            self._send_error(404, f"The model `{asked}` does not exist or you do not have "
                             "access to it.", "invalid_request_error", code="model_not_found")
            return
        fault = state.next_fault()
        if fault.kind != "ok":
            with state.lock:
                state.injected[fault.kind] = state.injected.get(fault.kind, 0) + 1
        if fault.kind == "429":
            headers = {"Retry-After": str(math.ceil(fault.retry_after_s))}
            if fault.retry_after_s:
                headers["retry-after-ms"] = str(int(fault.retry_after_s * 1000))
            self._send_error(429, "Rate limit reached (injected fault).", "requests", headers)
            return
        if fault.kind == "500":
            self._send_error(500, "Internal server error (injected fault).", "server_error")
            return
        if fault.kind == "hang":
            while not state.stopping.wait(0.05):
                if self._client_gone():
                    break
            self._cut_connection()
            return
        model = str(request.get("model") or "replay")
        if not state.wait_for_slot():
            self._cut_connection()
            return
        try:
            self._answer(request, messages, model, fault)
        finally:
            state.generating.release()

    def _answer(self, request: dict[str, Any], messages: list[dict[str, Any]], model: str,
                fault: Fault) -> None:
        state = self.server.state
        behaviour = state.behaviour
        try:
            _, answer = state.pick_answer(messages, model)
        except UnknownTask as err:  # an error status: a client must not take it for an answer
            self._send_error(404, str(err), "invalid_request_error")
            return
        rate = state.rate_for(model)
        tokens = _tokens(answer)
        finish = "stop"
        prompt_tokens = behaviour.prompt_tokens([content_text(m.get("content")) for m in messages])
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        limit = limit if isinstance(limit, int) and limit > 0 else None
        window = behaviour.context_window
        streamed = bool(request.get("stream"))
        if window and behaviour.overflow == "truncate" and prompt_tokens >= window:
            prompt_tokens = window - 1 - (limit or 0) if limit and limit < window // 2 \
                else window // 2  # Ollama keeps the prompt's end, leaving room to answer
            with state.lock:
                state.overflows += 1
        if window and (prompt_tokens >= window or (
                not behaviour.fit_answer_cap and prompt_tokens + (limit or 0) > window)):
            with state.lock:
                state.overflows += 1
            if streamed and behaviour.overflow == "empty":
                self._empty_stream()
            else:
                body = {"error": {"message": overflow_message(window, prompt_tokens, limit),
                                  "type": "invalid_request_error", "param": "messages",
                                  "code": "context_length_exceeded"}}
                self._send_json(400, body)
            return
        if window:
            room = window - prompt_tokens
            limit = min(limit, room) if limit else room
        if limit is not None and limit < len(tokens):
            tokens, finish = tokens[:limit], "length"
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": prompt_tokens + len(tokens),
        }
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if streamed:
            stream_options = request.get("stream_options") or {}
            include_usage = bool(stream_options.get("include_usage")) and behaviour.stream_usage
            usage_sent = usage if include_usage else None
            self._stream(ident, model, tokens, finish, usage_sent, fault, rate)
        else:
            self._sleep_until(time.monotonic() + self._duration(len(tokens), rate))
            message = {"role": "assistant", "content": "".join(tokens)}
            self._send_json(
                200,
                {
                    "id": ident,
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
                    ],
                    "usage": usage,
                },
            )

    def _empty_stream(self) -> None:
        """HTTP 200, an event stream with nothing in it (llama-cpp-python's answer to a prompt
        over its window while streaming)."""
        self.server.state.count_status(200)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._write_chunk(b"")

    def _interrupted(self) -> bool:
        """Another request waits and the endpoint interrupts for it: end this stream now."""
        state = self.server.state
        if not state.behaviour.interrupt:
            return False
        with state.lock:
            if state.waiting == 0:
                return False
            state.interrupted += 1
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")
        return True

    # ---------------------------------------------------------------- streaming

    def _duration(self, n_tokens: int, rate: float) -> float:
        state = self.server.state
        return state.ttft_s + (max(n_tokens - 1, 0) / rate if rate > 0 else 0.0)

    def _sleep_until(self, when: float) -> None:
        delay = when - time.monotonic()
        if delay > 0:
            self.server.state.stopping.wait(delay)

    def _paced(self, tokens: list[str], rate: float) -> Iterator[str]:
        """The tokens grouped into pieces, each sent when its last token is due: the first
        after ttft_s, then one every 1/rate seconds."""
        state = self.server.state
        start = time.monotonic()
        if not tokens:
            return
        if rate <= 0:
            self._sleep_until(start + state.ttft_s)
            for i in range(0, len(tokens), 16):
                yield "".join(tokens[i : i + 16])
            return
        sent = 0
        while sent < len(tokens):
            if state.stopping.is_set():
                return
            elapsed = time.monotonic() - start - state.ttft_s
            due = 0 if elapsed < 0 else min(len(tokens), int(elapsed * rate) + 1)
            if due > sent:
                yield "".join(tokens[sent:due])
                sent = due
            else:
                self._sleep_until(start + state.ttft_s + sent / rate)

    def _stream(
        self,
        ident: str,
        model: str,
        tokens: list[str],
        finish: str,
        usage: dict[str, int] | None,
        fault: Fault,
        rate: float,
    ) -> None:
        created = int(time.time())

        def chunk(delta: dict[str, str], finish_reason: str | None) -> bytes:
            body = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [
                    {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}
                ],
            }
            return b"data: " + json.dumps(body).encode() + b"\n\n"

        self.server.state.count_status(200)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._write_chunk(chunk({"role": "assistant", "content": ""}, None))
        if self._interrupted():
            return
        for n, piece in enumerate(self._paced(tokens, rate)):
            if fault.kind == "drop" and n >= 2:
                break
            self._write_chunk(chunk({"content": piece}, None))
            if self._interrupted():
                return
        if fault.kind == "drop" or self.server.state.stopping.is_set():
            self._cut_connection()
            return
        self._write_chunk(chunk({}, finish))
        if usage is not None:
            body = {
                "id": ident,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [],
                "usage": usage,
            }
            self._write_chunk(b"data: " + json.dumps(body).encode() + b"\n\n")
        self._write_chunk(b"data: [DONE]\n\n")
        self._write_chunk(b"")


def _listing(name: str, state: ReplayState) -> dict[str, Any]:
    """One model of `GET /v1/models`; a served model with a price lists it (USD per million
    tokens, under "pricing")."""
    entry: dict[str, Any] = {"id": name, "object": "model", "created": 0, "owned_by": "ooda"}
    if state.behaviour.list_context and state.behaviour.context_window:
        entry["max_model_len"] = state.behaviour.context_window
    served = state.served.get(name)
    if served is not None:
        entry["pricing"] = {"prompt": served.price_in, "completion": served.price_out}
        entry["tokens_per_s"] = state.rate_for(name)
    return entry


class HttpServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], state: ReplayState) -> None:
        self.state = state
        super().__init__(address, Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, closed streams) are normal here: log quietly."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)
