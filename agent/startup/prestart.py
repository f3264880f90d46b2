"""Open the sandbox backend, and start the first container, while the command line is parsed.

`ooda run` spends a few hundred milliseconds starting Python, importing typer and parsing its
options before it knows what to do; the Docker connection (SDK import, engine ping, image
check, removal of leftovers) needs none of that, and neither does starting the first sandbox
container of a task without requirements (agent/sandbox/docker/launch.py: its PID 1 then imports
the toolchain in parallel). `begin(argv)` (called by agent/startup/entry.py) starts both in
threads and returns a Prestart, which start-up hands to the command line
(ooda.agent.cli.app.main) and the command to its run (ooda.agent.app.run.Prestarted):
`take_backend(name)` hands the backend over when the name the options settled on is the one
guessed, else None (then the caller opens its own; the guessed one is closed); `take_launch()`
hands over a started container (one per call: the daemon may give two). A container nobody
takes goes away with this process: its PID 1 exits when the control socket closes.
"""

from __future__ import annotations

import atexit
import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ooda.agent.startup.handoff import command_args

if TYPE_CHECKING:
    from ooda.agent.contracts.protocols import Sandbox, SandboxBackend
    from ooda.agent.sandbox.docker.launch import Launched

# The imports below in functions run in this module's threads, while typer parses: at module
# top they would cost every command (`ooda --help` included) the SDKs' import time. A thread
# imports no module of ooda's packages whose __init__ imports their own modules (core.sources,
# context, models, edits, ...): begin() imports what a thread uses first (_import_for_threads).


class Prestart:
    """What begin() started for one command (implements ooda.agent.app.run.Prestarted)."""

    def __init__(
        self, *, leftovers_cleaned: bool = False,
        launched: Sequence[tuple[Path, Launched]] = (),
        give_back: Callable[[Path, Sandbox], bool] | None = None,
    ) -> None:
        self.leftovers_cleaned = leftovers_cleaned
        self._give_back = give_back
        """The daemon's: takes back a container it gave (agent/startup/daemon.py)."""
        """The daemon removes dead invocations' containers between commands."""
        self._lock = threading.Lock()
        self._opening: tuple[str | None, threading.Thread,
                             list[SandboxBackend | BaseException]] | None = None
        self._launching: tuple[threading.Thread | None, list[tuple[Path, Launched]]] | None = (
            (None, list(launched)) if launched else None
        )

    def open_backend(self, name: str | None) -> None:
        """Start opening the backend `name` (None: the default one)."""
        result: list[SandboxBackend | BaseException] = []
        clean = not self.leftovers_cleaned

        def opening() -> None:
            try:
                from ooda.agent.sandbox.registry import open_backend

                result.append(open_backend(name, clean_leftovers=clean))
            except BaseException as exc:  # noqa: BLE001 - the caller opens its own and reports
                result.append(exc)

        thread = threading.Thread(target=opening, name="ooda-prestart", daemon=True)
        with self._lock:
            if self._opening is not None:
                return
            self._opening = (name, thread, result)
        thread.start()

    def launch(self, path: str) -> None:
        """Start a sandbox container for the task directory at `path`, from the image the
        backend used last (the runner adopts it only when that is still the image and the task
        has no requirements; otherwise it is dropped and exits)."""
        found: list[tuple[Path, Launched]] = []

        def launching() -> None:
            try:
                if not (Path(path) / "task.toml").is_file():
                    return  # a plain repository: left to the runner
                from ooda.agent.sandbox.docker import image
                from ooda.agent.sandbox.docker.launch import SdkEngine, launch_on_last_image

                if image.last_tag() is None:
                    return  # no image yet: not worth connecting
                started = launch_on_last_image(SdkEngine.connect(), "ooda-prestart-")
                if started is not None:
                    atexit.register(shutil.rmtree, started[0], ignore_errors=True)  # if not taken
                    found.append(started)
            except Exception:  # no engine, no image yet, a bad task: the runner says so later
                return

        thread = threading.Thread(target=launching, name="ooda-prelaunch", daemon=True)
        with self._lock:
            if self._launching is not None:
                return
            self._launching = (thread, found)
        thread.start()

    def take_launch(self) -> tuple[Path, Launched] | None:
        """(its work directory, a started container) while one is left untaken, else None."""
        with self._lock:
            launching = self._launching
        if launching is None:
            return None
        thread, found = launching
        if thread is not None:
            thread.join()
        with self._lock:
            return found.pop(0) if found else None

    def give_back(self, work: Path, sandbox: Sandbox) -> bool:
        """Hand `sandbox`, adopted from a container `launched` gave with its directory `work`,
        back to the daemon that gave it, idle, for its next command (True: the daemon has it
        and `work`; False: no daemon gave it or none takes it now, the caller ends it)."""
        return self._give_back is not None and self._give_back(work, sandbox)

    def take_backend(self, name: str | None) -> SandboxBackend | None:
        """The backend begun, if it is the one named (None/"auto" alike), else None."""
        with self._lock:
            opening, self._opening = self._opening, None
        if opening is None:
            return None
        guessed, thread, result = opening
        thread.join()
        backend = result[0] if result else None
        if backend is None or isinstance(backend, BaseException):
            return None
        defaults = (None, "auto")
        if (guessed in defaults and name in defaults) or backend.name == name:
            return backend
        backend.close()
        return None


def _model_values(argv: Sequence[str]) -> set[str]:
    """The --model value(s) on a command line."""
    found = {argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--model"}
    return found | {a.split("=", 1)[1] for a in argv if a.startswith("--model=")}


def _asks_endpoint(models: set[str]) -> bool:
    """Whether the run asks an endpoint: no --model named is a source that asks none
    (agent/core/sources)."""
    from ooda.agent.core.sources import source_kind

    return all(source_kind(name).asks_endpoint for name in models)


def _import_for_threads() -> None:
    """Import here, in the calling thread, the ooda modules begin()'s threads use. Two threads
    importing one package by different entries (the package, and a module its __init__
    imports) each hold the lock the other waits for; Python then gives one of them the module
    half made: a cold `ooda run` failed now and then with "cannot import name ... from
    partially initialized module 'ooda.agent.context.index'" (exit 3) when the thread looked up
    the --model source while the command imported its run. The run imports these anyway; the
    threads keep only the SDKs' imports (entered by their top package) and the engine's I/O."""
    import ooda.agent.core.sources
    import ooda.agent.models.http_client
    import ooda.agent.sandbox.docker.image
    import ooda.agent.sandbox.docker.launch
    import ooda.agent.sandbox.registry  # noqa: F401


def _import_openai() -> None:
    """Import the model client's SDK (about a second)."""
    from ooda.agent.models.http_client import warm_http_client

    try:
        warm_http_client()
    except ImportError:
        pass


def guess_sandbox(argv: Sequence[str]) -> str | None:
    """The --sandbox value on a command line (None when absent: the default backend)."""
    for i, arg in enumerate(argv):
        if arg == "--sandbox" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--sandbox="):
            return arg.split("=", 1)[1]
    return None


def begin(
    argv: Sequence[str],
    *,
    leftovers_cleaned: bool = False,
    launched: Sequence[tuple[Path, Launched]] = (),
    give_back: Callable[[Path, Sandbox], bool] | None = None,
) -> Prestart:
    """What to start for the command line `argv` (without the program name): for `ooda run`,
    open the backend it names and import the `openai` SDK (about a second of import) unless
    the source asks no endpoint, and start its first container unless `launched` (the
    daemon's warm ones) is given; for any command, `launched` is offered to its run, and
    `give_back` (the daemon's) takes those containers back when the run is done with them."""
    started = Prestart(leftovers_cleaned=leftovers_cleaned, launched=launched,
                       give_back=give_back)
    command = command_args(list(argv))
    if command[:1] != ["run"] or {"-h", "--help"} & set(argv):
        return started
    args = command[1:]
    _import_for_threads()
    if _asks_endpoint(_model_values(args)):
        threading.Thread(target=_import_openai, name="ooda-import-openai", daemon=True).start()
    name = guess_sandbox(args)
    if name == "local":
        return started
    started.open_backend(name)
    if name in (None, "auto", "docker"):
        path = next((a for a in args if not a.startswith("-")), None)
        if path is not None:
            started.launch(path)
    return started
