"""The bundled OpenAI-compatible endpoint behind `ooda serve`: replays scripted answers.

A stdlib `ThreadingHTTPServer` serving `GET /v1/models`, `GET /stats` and
`POST /v1/chat/completions` (streamed as server-sent events in chunked transfer encoding, or
as one JSON object), in the wire format the `openai` SDK parses.

Scripts are `replay.jsonl` files, one answer per line:
`{"answer": "...", "round": 1, "contains": "substr", "task": "id"}` (all but `answer`
optional). A request belongs to the task named by a `Task id: <id>` line in its first
system/user message that has one; its round is the number of user messages. The answers of
that task whose round matches (or, when none names this round, is absent) and whose
`contains` occurs in the last user message are served in turn, a counter per (task, round),
so parallel samples differ.

`answer_as` rewrites every served answer into another edit format, as chat models often
answer (whole files, bare functions in prose: agent/models/answer_styles.py), so that the parser's
other formats can be measured end to end on tasks whose scripted fix is known.

For tests and demos it can pace the stream (`ttft_s`, `tokens_per_s`, ~4 characters a
token) and inject faults, in arrival order (`faults`, cycled) or at random (`fault_rate_*`
with `seed`): "429" (optionally "429:SECONDS", sent as Retry-After / retry-after-ms),
"500", "drop" (a few chunks, then the connection is cut without [DONE]) and "hang" (no
answer until the client gives up).
"""

from __future__ import annotations

import json
import logging
import math
import random
import re
import select
import socket
import threading
import time
import tomllib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.models.answer_styles import STYLES, restyle

__all__ = ["ReplayServer", "Script", "load_scripts", "serve_forever"]

log = logging.getLogger(__name__)

_TASK_ID_RE = re.compile(r"^\s*Task id:\s*(\S+)\s*$", re.MULTILINE | re.IGNORECASE)
_FAULTS = ("ok", "429", "500", "drop", "hang")
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Script:
    """One scripted answer."""

    task: str
    """The task it answers."""
    answer: str
    """The completion text served."""
    round: int | None = None
    """Serve only in this round (number of user messages); None: any round."""
    contains: str | None = None
    """Serve only when the last user message contains this text; None: always."""


# --------------------------------------------------------------------------- scripts


def _dir_task_id(directory: Path) -> str:
    """The id of the task directory: `id` in its task.toml when there is one, else its name."""
    toml = directory / "task.toml"
    if toml.is_file():
        try:
            task_id = tomllib.loads(toml.read_text(encoding="utf-8")).get("id")
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
            task_id = None
        if isinstance(task_id, str) and task_id:
            return task_id
    return directory.resolve().name


def _load_file(path: Path) -> list[Script]:
    default_task = _dir_task_id(path.parent)
    scripts: list[Script] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"{where}: not valid JSON ({err.msg})") from None
        if not isinstance(data, dict) or not isinstance(data.get("answer"), str):
            raise UsageError(f'{where}: each line must be an object with an "answer" string')
        round_ = data.get("round")
        if round_ is not None and (not isinstance(round_, int) or isinstance(round_, bool)):
            raise UsageError(f'{where}: "round" must be an integer')
        contains = data.get("contains")
        if contains is not None and not isinstance(contains, str):
            raise UsageError(f'{where}: "contains" must be a string')
        task = data.get("task", default_task)
        if not isinstance(task, str) or not task:
            raise UsageError(f'{where}: "task" must be a non-empty string')
        scripts.append(Script(task, data["answer"], round_, contains))
    return scripts


def load_scripts(paths: list[Path]) -> dict[str, list[Script]]:
    """Scripts by task id, from `replay.jsonl` files and directories searched for them."""
    by_task: dict[str, list[Script]] = {}
    for path in paths:
        if path.is_dir():
            files = sorted(path.rglob("replay.jsonl"))
        elif path.is_file():
            files = [path]
        else:
            raise UsageError(f"replay script path {path} does not exist")
        for file in files:
            for script in _load_file(file):
                by_task.setdefault(script.task, []).append(script)
    return by_task


# --------------------------------------------------------------------------- state


@dataclass(frozen=True)
class _Fault:
    kind: str
    retry_after_s: float = 0.0


def _parse_fault(spec: str) -> _Fault:
    kind, _, arg = spec.strip().lower().partition(":")
    if kind not in _FAULTS:
        raise UsageError(f"unknown fault {spec!r}; use one of {', '.join(_FAULTS)}")
    if arg and kind != "429":
        raise UsageError(f"fault {spec!r} takes no argument")
    try:
        retry_after = float(arg) if arg else 0.0
    except ValueError:
        raise UsageError(f"fault {spec!r}: the Retry-After must be a number") from None
    return _Fault(kind, retry_after)


class _State:
    """Everything the handler threads share, behind one lock."""

    def __init__(
        self,
        scripts: dict[str, list[Script]],
        *,
        tokens_per_s: float,
        ttft_s: float,
        faults: list[_Fault],
        rates: dict[str, float],
        seed: int | None,
        api_key: str | None,
        models: list[str],
        accept_stream_options: bool,
        answer_as: str = "as-is",
    ) -> None:
        self.scripts = scripts
        self.answer_as = answer_as
        self.restyled = 0
        """Answers rewritten so far ("mixed" alternates its styles by this count)."""
        self.tokens_per_s = tokens_per_s
        self.ttft_s = ttft_s
        self.faults = faults
        self.rates = rates
        self.random = random.Random(seed)
        self.api_key = api_key
        self.models = models
        self.accept_stream_options = accept_stream_options
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.counters: dict[tuple[str, int], int] = {}
        self.arrivals = 0
        self.requests = 0
        self.chat_requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.status: dict[str, int] = {}
        self.injected: dict[str, int] = {}
        self.connections: set[socket.socket] = set()

    def next_fault(self) -> _Fault:
        with self.lock:
            index = self.arrivals
            self.arrivals += 1
            if self.faults:
                fault = self.faults[index % len(self.faults)]
                if fault.kind != "ok":
                    return fault
            for kind in ("429", "500", "drop"):
                rate = self.rates.get(kind, 0.0)
                if rate > 0 and self.random.random() < rate:
                    return _Fault(kind)
        return _Fault("ok")

    def pick_answer(self, messages: list[dict[str, Any]]) -> tuple[str, str]:
        """(task id, answer) for a request's messages."""
        task = None
        for message in messages:
            if message.get("role") in ("system", "user", "developer"):
                match = _TASK_ID_RE.search(_content_text(message.get("content")))
                if match:
                    task = match.group(1)
                    break
        users = [m for m in messages if m.get("role") == "user"]
        round_ = len(users)
        last_user = _content_text(users[-1].get("content")) if users else ""
        if task is None:
            return "?", "no scripted answer: the prompt has no 'Task id: <id>' line"
        matching = [
            s
            for s in self.scripts.get(task, [])
            if (s.round is None or s.round == round_)
            and (s.contains is None or s.contains in last_user)
        ]
        # answers written for this very round win over answers for any round
        candidates = [s for s in matching if s.round == round_] or matching
        if not candidates:
            return task, f"no scripted answer for task {task} (round {round_})"
        with self.lock:
            count = self.counters.get((task, round_), 0)
            self.counters[(task, round_)] = count + 1
        answer = candidates[count % len(candidates)].answer
        if self.answer_as != "as-is":
            with self.lock:
                served = self.restyled
                self.restyled += 1
            first_user = _content_text(users[0].get("content")) if users else ""
            answer = restyle(answer, first_user, self.answer_as, served)
        return task, answer

    def count_status(self, status: int | str) -> None:
        with self.lock:
            key = str(status)
            self.status[key] = self.status.get(key, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "chat_requests": self.chat_requests,
                "in_flight": self.in_flight,
                "max_in_flight": self.max_in_flight,
                "status": dict(self.status),
                "faults": dict(self.injected),
            }


def _content_text(content: object) -> str:
    """A message's text, whether a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        )
    return ""


def _tokens(text: str) -> list[str]:
    return [text[i : i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def _estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


# --------------------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    """One connection; `server.state` holds the shared state."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    """TCP_NODELAY, as real inference servers set it: without it each small streamed chunk after
    the first waits for the client's delayed ACK (about 40 ms on Linux)."""
    server: _Server

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
        self, status: int, message: str, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
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
                data = [
                    {"id": m, "object": "model", "created": 0, "owned_by": "ooda"}
                    for m in state.models
                ]
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
        _, answer = state.pick_answer(messages)
        model = str(request.get("model") or "replay")
        tokens = _tokens(answer)
        finish = "stop"
        limit = request.get("max_completion_tokens") or request.get("max_tokens")
        if isinstance(limit, int) and 0 < limit < len(tokens):
            tokens, finish = tokens[:limit], "length"
        prompt_tokens = sum(_estimate_tokens(_content_text(m.get("content"))) for m in messages)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(tokens),
            "total_tokens": prompt_tokens + len(tokens),
        }
        ident = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        if request.get("stream"):
            stream_options = request.get("stream_options") or {}
            include_usage = bool(stream_options.get("include_usage"))
            self._stream(ident, model, tokens, finish, usage if include_usage else None, fault)
        else:
            self._sleep_until(time.monotonic() + self._duration(len(tokens)))
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

    # ---------------------------------------------------------------- streaming

    def _duration(self, n_tokens: int) -> float:
        state = self.server.state
        rate = state.tokens_per_s
        return state.ttft_s + (max(n_tokens - 1, 0) / rate if rate > 0 else 0.0)

    def _sleep_until(self, when: float) -> None:
        delay = when - time.monotonic()
        if delay > 0:
            self.server.state.stopping.wait(delay)

    def _paced(self, tokens: list[str]) -> Iterator[str]:
        """The tokens grouped into pieces, each sent when its last token is due: the first
        after ttft_s, then one every 1/tokens_per_s seconds."""
        state = self.server.state
        start = time.monotonic()
        if not tokens:
            return
        if state.tokens_per_s <= 0:
            self._sleep_until(start + state.ttft_s)
            for i in range(0, len(tokens), 16):
                yield "".join(tokens[i : i + 16])
            return
        sent = 0
        while sent < len(tokens):
            if state.stopping.is_set():
                return
            elapsed = time.monotonic() - start - state.ttft_s
            due = 0 if elapsed < 0 else min(len(tokens), int(elapsed * state.tokens_per_s) + 1)
            if due > sent:
                yield "".join(tokens[sent:due])
                sent = due
            else:
                self._sleep_until(start + state.ttft_s + sent / state.tokens_per_s)

    def _stream(
        self,
        ident: str,
        model: str,
        tokens: list[str],
        finish: str,
        usage: dict[str, int] | None,
        fault: _Fault,
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
        for n, piece in enumerate(self._paced(tokens)):
            if fault.kind == "drop" and n >= 2:
                break
            self._write_chunk(chunk({"content": piece}, None))
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


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], state: _State) -> None:
        self.state = state
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients that hang up (timeouts, closed streams) are normal here: log quietly."""
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


# --------------------------------------------------------------------------- public API


class ReplayServer:
    """An OpenAI-compatible endpoint replaying scripted answers, served from a thread."""

    def __init__(
        self,
        scripts: list[Path],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tokens_per_s: float = 0.0,
        ttft_s: float = 0.0,
        faults: list[str] | None = None,
        fault_rate_429: float = 0.0,
        fault_rate_500: float = 0.0,
        fault_rate_drop: float = 0.0,
        seed: int | None = None,
        api_key: str | None = None,
        models: list[str] | None = None,
        accept_stream_options: bool = True,
        answer_as: str = "as-is",
    ) -> None:
        """`scripts`: replay.jsonl files or directories searched for them. `tokens_per_s`
        0 streams at once. `faults` apply to chat requests in arrival order, cycled.
        `api_key`: when set, requests must bear it. `accept_stream_options=False` rejects
        requests carrying stream_options with a 400, like some real endpoints.
        `answer_as`: one of ooda.agent.models.answer_styles.STYLES, how each answer is rewritten."""
        if answer_as not in STYLES:
            raise UsageError(f"unknown answer style {answer_as!r}; use one of "
                             f"{', '.join(STYLES)}")
        if tokens_per_s < 0 or ttft_s < 0:
            raise UsageError("tokens_per_s and ttft_s must not be negative")
        rates = {"429": fault_rate_429, "500": fault_rate_500, "drop": fault_rate_drop}
        if any(not 0.0 <= r <= 1.0 for r in rates.values()):
            raise UsageError("fault rates must be between 0 and 1")
        self.host = host
        self.port = port
        self._state = _State(
            load_scripts(scripts),
            tokens_per_s=tokens_per_s,
            ttft_s=ttft_s,
            faults=[_parse_fault(f) for f in faults or []],
            rates=rates,
            seed=seed,
            api_key=api_key,
            models=models or ["replay"],
            accept_stream_options=accept_stream_options,
            answer_as=answer_as,
        )
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """`http://HOST:PORT/v1` once started."""
        if self._server is None:
            raise RuntimeError("the server is not started")
        address = self._server.server_address
        host = address[0].decode() if isinstance(address[0], bytes) else str(address[0])
        port = address[1]
        shown = f"[{host}]" if ":" in host else host
        return f"http://{shown}:{port}/v1"

    @property
    def stats(self) -> dict[str, Any]:
        """Counters: requests, chat_requests, in_flight, max_in_flight, status (by code, as
        strings), faults (injected, by kind)."""
        return self._state.snapshot()

    @property
    def tasks(self) -> list[str]:
        """The task ids that have scripts."""
        return sorted(self._state.scripts)

    def start(self) -> str:
        """Bind and serve in a background thread; returns the base URL."""
        if self._server is not None:
            return self.base_url
        try:
            self._server = _Server((self.host, self.port), self._state)
        except OSError as err:
            raise UsageError(f"cannot listen on {self.host}:{self.port}: {err.strerror}") from None
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving, end hanging and streaming requests, close every connection."""
        server, self._server = self._server, None
        if server is None:
            return
        self._state.stopping.set()
        server.shutdown()
        with self._state.lock:
            connections = list(self._state.connections)
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ReplayServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_forever(
    scripts: list[Path],
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    tokens_per_s: float = 0.0,
    ttft_s: float = 0.0,
    faults: list[str] | None = None,
    fault_rate_429: float = 0.0,
    fault_rate_500: float = 0.0,
    fault_rate_drop: float = 0.0,
    seed: int | None = None,
    api_key: str | None = None,
    models: list[str] | None = None,
    on_ready: Callable[[str], None] | None = None,
    answer_as: str = "as-is",
) -> None:
    """Serve until interrupted (Ctrl-C). `on_ready(base_url)` is called once listening;
    by default the base URL is printed on standard output."""
    server = ReplayServer(
        scripts,
        host=host,
        port=port,
        tokens_per_s=tokens_per_s,
        ttft_s=ttft_s,
        faults=faults,
        fault_rate_429=fault_rate_429,
        fault_rate_500=fault_rate_500,
        fault_rate_drop=fault_rate_drop,
        seed=seed,
        api_key=api_key,
        models=models,
        answer_as=answer_as,
    )
    base_url = server.start()
    if on_ready is not None:
        on_ready(base_url)
    else:
        tasks = len(server.tasks)
        print(f"ooda serve: {tasks} scripted task(s) at {base_url} (Ctrl-C stops)", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
