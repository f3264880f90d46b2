"""The bundled OpenAI-compatible endpoint behind `ooda serve`: replays scripted answers.

A stdlib HTTP server (agent/models/replay_http.py) run from a thread, serving the answers of
`replay.jsonl` scripts (agent/models/replay_scripts.py) to the request each fits
(agent/models/replay_state.py): this module is its public face, `ReplayServer` and
`serve_forever`.

`answer_as` rewrites every served answer into another edit format, as chat models often
answer (whole files, bare functions in prose: agent/models/answer_styles.py), so that the parser's
other formats can be measured end to end on tasks whose scripted fix is known.

For tests and demos it can pace the stream (`ttft_s`, `tokens_per_s`, ~4 characters a
token) and inject faults, in arrival order (`faults`, cycled) or at random (`fault_rate_*`
with `seed`): "429" (optionally "429:SECONDS", sent as Retry-After / retry-after-ms),
"500", "drop" (a few chunks, then the connection is cut without [DONE]) and "hang" (no
answer until the client gives up). `behaviour` copies a local server's limits and habits
(one generation at a time, streams interrupted, a context window: agent/models/
replay_behaviour.py).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.models.answer_styles import STYLES
from ooda.agent.models.replay_behaviour import Behaviour
from ooda.agent.models.replay_http import HttpServer
from ooda.agent.models.replay_scripts import Script, ScriptFiles, load_scripts
from ooda.agent.models.replay_state import ReplayState, ServedModel, parse_fault, parse_served

__all__ = [
    "ReplayServer",
    "Script",
    "ServedModel",
    "load_scripts",
    "parse_served",
    "serve_forever",
]


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
        served: list[ServedModel] | None = None,
        behaviour: Behaviour | None = None,
        request_log: Path | None = None,
        strict_models: bool = False,
    ) -> None:
        """`scripts`: replay.jsonl files or directories searched for them. `tokens_per_s`
        0 streams at once. `faults` apply to chat requests in arrival order, cycled.
        `api_key`: when set, requests must bear it. `accept_stream_options=False` rejects
        requests carrying stream_options with a 400, like some real endpoints.
        `answer_as`: one of ooda.agent.models.answer_styles.STYLES, how each answer is rewritten.
        `served`: the models listed, each with its own token rate and price (replaces
        `models`); scripts naming a model are served only to it. `behaviour`: the limits and
        habits of a local server to copy (agent/models/replay_behaviour.py). `request_log`: a
        file each chat request (model, messages) is appended to, one JSON line each.
        `strict_models`: a request for a model not listed is HTTP 404 model_not_found, as
        OpenAI's and vLLM's endpoints answer (default: any name is served, as llama.cpp)."""
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
        files = ScriptFiles(scripts)
        self._state = ReplayState(
            files.scripts,
            script_files=files,
            tokens_per_s=tokens_per_s,
            ttft_s=ttft_s,
            faults=[parse_fault(f) for f in faults or []],
            rates=rates,
            seed=seed,
            api_key=api_key,
            models=models or ["replay"],
            accept_stream_options=accept_stream_options,
            answer_as=answer_as,
            served=served,
            behaviour=behaviour,
            request_log=request_log,
            strict_models=strict_models,
        )
        self._server: HttpServer | None = None
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
        strings), faults (injected, by kind), waiting (for a generation slot), interrupted
        (streams ended for a waiting request), overflows (prompts over the window)."""
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
            self._server = HttpServer((self.host, self.port), self._state)
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
    served: list[ServedModel] | None = None,
    behaviour: Behaviour | None = None,
    request_log: Path | None = None,
    strict_models: bool = False,
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
        served=served,
        behaviour=behaviour,
        request_log=request_log,
        strict_models=strict_models,
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
