"""Open the sandbox backend while the command line is still being parsed.

`ooda run` spends a few hundred milliseconds starting Python, importing typer and parsing its
options before it knows what to do; the Docker connection (SDK import, engine ping, image
check, removal of leftovers) needs none of that. `begin()` (called by agent.cli.main for the
commands that open a backend) starts opening it in a thread; `take(name)` hands it over when
the name the options settled on is the one guessed, else None (then the caller opens its own;
the guessed one is closed).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agent.sandbox import SandboxBackend

_lock = threading.Lock()
_started: tuple[str | None, threading.Thread, list[SandboxBackend | BaseException]] | None = None


def guess_sandbox(argv: Sequence[str]) -> str | None:
    """The --sandbox value on a command line (None when absent: the default backend)."""
    for i, arg in enumerate(argv):
        if arg == "--sandbox" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--sandbox="):
            return arg.split("=", 1)[1]
    return None


def begin(argv: Sequence[str]) -> None:
    """Start opening the backend the command line names (once per process)."""
    global _started
    name = guess_sandbox(argv)
    if name == "local":
        return
    result: list[SandboxBackend | BaseException] = []

    def opening() -> None:
        try:
            from agent.runner import open_backend

            result.append(open_backend(name))
        except BaseException as exc:  # noqa: BLE001 - the caller opens its own and reports
            result.append(exc)

    with _lock:
        if _started is not None:
            return
        thread = threading.Thread(target=opening, name="ooda-prestart", daemon=True)
        _started = (name, thread, result)
    thread.start()


def take(name: str | None) -> SandboxBackend | None:
    """The backend begin() opened, if it is the one named (None/"auto" alike), else None."""
    global _started
    with _lock:
        started, _started = _started, None
    if started is None:
        return None
    guessed, thread, result = started
    thread.join()
    backend = result[0] if result else None
    if backend is None or isinstance(backend, BaseException):
        return None
    defaults = (None, "auto")
    if (guessed in defaults and name in defaults) or backend.name == name:
        return backend
    backend.close()
    return None
