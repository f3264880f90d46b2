"""The warm `ooda` daemon: the SDKs imported once, a sandbox container started ahead, a forked
worker per command.

`python -m ooda.agent.startup.daemon KEY` (started in the background by agent/startup/entry.py after a command ran
without one) imports everything `ooda run` needs, starts WARM_CONTAINERS Docker sandbox
containers for the image used last (one per loop turn, so a command is never kept waiting for
more than one start), binds its socket and waits. Each command that agent/startup/client.py
hands over gets a forked worker: the client's stdin/stdout/stderr, working directory,
environment, umask and argv, and the waiting containers that are ready, then the ordinary
`ooda` command line runs in it (a run's pool adopts them: with two, a single candidate's
after-tests stages run beside its tests, agent/verify/spare.py).
The daemon reaps the worker and sends its exit code back; a client that goes away gets its
worker interrupted (SIGINT, as Ctrl-C would).

The daemon itself stays single-threaded (it forks), takes only its own user's connections
(SO_PEERCRED), and exits after OODA_DAEMON_IDLE_S seconds without a command (default 1800),
on `ooda daemon stop`, or when its lock is taken by another daemon of the same key.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from ooda.agent.sandbox.docker import image
from ooda.agent.sandbox.docker.launch import Launched, SdkEngine, launch_on_last_image
from ooda.agent.sandbox.registry import cleanup_leftovers
from ooda.agent.startup import client, commands, entry
from ooda.agent.support import phases
from ooda.agent.support.exits import finish, flush_output, run_deferred

IDLE_S = float(os.environ.get("OODA_DAEMON_IDLE_S", "1800"))
PRELOAD = (
    "openai", "docker", "rich.progress", "rich.live", "typer",
    "ooda.agent.cli.app", "ooda.agent.app.run", "ooda.agent.core.loop", "ooda.agent.verify.verifier", "ooda.agent.models.openai_model", "ooda.agent.models.server",
    "ooda.agent.core.sources", "ooda.agent.app.progress", "ooda.agent.app.evaluate.run", "ooda.agent.app.ci.run", "ooda.agent.startup.prestart",
    "ooda.agent.sandbox.registry",
    "ooda.agent.sandbox.docker.backend", "ooda.agent.sandbox.bwrap", "ooda.agent.sandbox.pool",
    "ooda.agent.sandbox.docker.launch", "ooda.verifiers.cascade", "ooda.tasks.loader",
    "ooda.tasks.detect_environment", "ooda.agent.cli.console",
    "netrc",  # the Docker SDK's HTTP library looks for ~/.netrc on each request
)
"""Modules imported before the first fork (what a command would otherwise import itself;
tests/agent/startup/test_daemon_preload.py checks that a run imports nothing more)."""


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ooda daemon[{os.getpid()}]: {message}",
          file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the warm container


@dataclass
class WarmContainer:
    """A started sandbox container nobody has taken yet, and the directory holding its slot."""

    work: Path
    launched: Launched

    def ready(self) -> bool:
        """Its PID 1 has connected (a command can use it without waiting)."""
        readable, _, _ = select.select([self.launched.listener], [], [], 0)
        return bool(readable)

    def discard(self) -> None:
        self.launched.release()  # PID 1 sees the socket close and exits; Docker removes it
        shutil.rmtree(self.work, ignore_errors=True)

    def give_away(self) -> None:
        """After a fork that handed it on: drop this process's copy, keep the files."""
        self.launched.listener.close()


WARM_CONTAINERS = 2
"""Containers kept started for the next command: a run's default verify concurrency."""


def start_warm(engine: SdkEngine) -> WarmContainer | None:
    """A container on the image used last, for tasks without requirements (None: no image)."""
    started = launch_on_last_image(engine, "ooda-daemon-")
    return WarmContainer(*started) if started is not None else None


# --------------------------------------------------------------------------- the server


@dataclass
class Daemon:
    """The serving loop's state: the listening socket, the running workers (pid → their
    client's connection), the warm containers, and what `ooda daemon status` reports."""

    key: str
    listener: socket.socket
    lock_fd: int
    files: dict[str, Path]
    workers: dict[int, socket.socket] = field(default_factory=dict)
    interrupted: set[int] = field(default_factory=set)
    warm: list[WarmContainer] = field(default_factory=list)
    engine: SdkEngine | None = None
    next_warm_try: float = 0.0
    served: int = 0
    started: float = field(default_factory=time.time)
    last_activity: float = field(default_factory=time.monotonic)
    stopping: bool = False
    stop_requested: bool = False
    registered: bool = False
    """Its status file is named in the user's index of daemons (client.register)."""

    def serve(self) -> None:
        self.last_activity = time.monotonic()  # idle from now, not from before the warm start
        self.write_status()
        try:
            while True:
                if self.stop_requested:
                    self.stop()
                self.reap()
                if self.stopping and not self.workers:
                    return
                if not self.stopping and not self.workers:
                    idle = time.monotonic() - self.last_activity
                    if idle >= IDLE_S:
                        log(f"idle for {idle:.0f} s: exiting")
                        return
                    self.keep_warm()
                waiting = [self.listener] if not self.stopping else []
                waiting += list(self.workers.values())
                readable, _, _ = select.select(waiting, [], [], self._turn_s())
                for sock in readable:
                    if sock is self.listener:
                        self.accept()
                    else:
                        self.client_gone(sock)
        finally:
            self.shutdown()

    def _turn_s(self) -> float:
        """How long a loop turn waits for a connection: not at all while another warm
        container is to be started (accepting a waiting client between two starts)."""
        if self.workers:
            return 0.05
        starting = (not self.stopping and len(self.warm) < WARM_CONTAINERS
                    and self.engine is not None and image.last_tag() is not None)
        return 0.0 if starting and time.monotonic() >= self.next_warm_try else 1.0

    def keep_warm(self) -> None:
        """Start one more warm container while fewer than WARM_CONTAINERS wait (and the
        image used last is known)."""
        tag = image.last_tag()
        for stale in [w for w in self.warm if w.launched.tag != tag]:
            stale.discard()  # `ooda sandbox build` made a new image
            self.warm.remove(stale)
        if len(self.warm) >= WARM_CONTAINERS or time.monotonic() < self.next_warm_try:
            return
        try:
            if self.engine is None:
                self.engine = SdkEngine.connect(timeout_s=5.0)
            if not self.warm:
                cleanup_leftovers()  # what killed workers or earlier processes left behind
            started = start_warm(self.engine)
            if started is not None:  # else no image yet
                self.warm.append(started)
        except Exception as exc:  # no engine now: commands start their own; try again later
            log(f"no warm container: {exc}")
            self.engine = None
            self.next_warm_try = time.monotonic() + 30.0

    def accept(self) -> None:
        conn, _ = self.listener.accept()
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        if uid != os.getuid():
            conn.close()
            return
        fds: list[int] = []
        try:
            conn.settimeout(5.0)
            request, fds = client.receive_request(conn)
            control = request.get("control")
            if control is not None:
                self.answer_control(conn, str(control))
                conn.close()
                return
            offers = [w for w in self.warm if w.ready()]
            pid = os.fork()
            if pid == 0:
                self.listener.close()
                for other in self.workers.values():
                    other.close()
                for kept in self.warm:
                    if kept not in offers:
                        kept.give_away()
                run_worker(conn, request, fds, offers, self.lock_fd)
        except Exception as exc:  # a bad or vanished client: drop it, nothing was started
            log(f"dropped a connection: {exc}")
            conn.close()
            return
        finally:
            for fd in fds:
                os.close(fd)
        for offer in offers:
            offer.give_away()
            self.warm.remove(offer)
        self.workers[pid] = conn
        self.served += 1
        self.last_activity = time.monotonic()
        try:
            conn.settimeout(5.0)
            client.send_line(conn, {"pid": pid})
        except OSError:
            self.client_gone(conn)
        self.write_status()

    def answer_control(self, conn: socket.socket, command: str) -> None:
        if command == "stop":
            self.stop()
        conn.sendall(json.dumps(self.status()).encode() + b"\n")

    def client_gone(self, conn: socket.socket) -> None:
        """The client hung up (or wrote, which it never does): interrupt its worker."""
        pid = next((p for p, c in self.workers.items() if c is conn), None)
        if pid is not None and pid not in self.interrupted:
            self.interrupted.add(pid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGINT)

    def reap(self) -> None:
        while self.workers:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.workers.pop(pid, None)
            self.interrupted.discard(pid)
            self.last_activity = time.monotonic()
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                client.send_line(conn, {"exit": code if code >= 0 else 128 - code})
            conn.close()

    def stop(self) -> None:
        """Take no more commands; exit once the running ones are done."""
        if not self.stopping:
            self.stopping = True
            self.listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.files["sock"].unlink()

    def status(self) -> dict[str, object]:
        return {
            "pid": os.getpid(), "key": self.key, "served": self.served,
            "running": len(self.workers), "started": self.started, "idle_exit_s": IDLE_S,
            "warm_container": bool(self.warm), "warm_containers": len(self.warm),
            "stopping": self.stopping,
            **client.fingerprint(),
        }

    def write_status(self) -> None:
        path = self.files["json"]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.status()))
        tmp.replace(path)
        if not self.registered:  # found from a shell with another runtime directory too
            self.registered = client.register(path)

    def shutdown(self) -> None:
        self.stop()
        for warm in self.warm:
            warm.discard()
        with contextlib.suppress(FileNotFoundError):
            self.files["json"].unlink()
        client.unregister()
        log(f"stopped after {self.served} command(s)")


# --------------------------------------------------------------------------- the worker


def run_worker(
    conn: socket.socket,
    request: dict[str, object],
    fds: list[int],
    offers: list[WarmContainer],
    lock_fd: int,
) -> NoReturn:
    """In the forked child: become the client's process and run its command line."""
    code = 3
    try:
        os.setpgid(0, 0)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.close(lock_fd)
        for target, fd in enumerate(fds[:3]):
            os.dup2(fd, target)
        for fd in fds:  # only 0-2 hold the client's streams (see _let_go_of_streams)
            if fd > 2:
                os.close(fd)
        _reopen_std_streams()
        os.chdir(str(request["cwd"]))
        env = request["env"]
        assert isinstance(env, dict)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in env.items()})
        os.umask(int(str(request["umask"])))
        argv = request["argv"]
        assert isinstance(argv, list)
        sys.argv = [str(a) for a in argv]
        started = request.get("started")
        if isinstance(started, (int, float)):
            phases.set_command_start(float(started))
        code = entry.run_here(
            launched=[(offer.work, offer.launched) for offer in offers],
            leftovers_cleaned=True,  # done here, between commands (Daemon.keep_warm)
            defer=True,  # its tidying-up once the client has its code (below)
        )
    except BaseException:  # noqa: BLE001 - a worker never returns into the daemon's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        try:
            flush_output()
            _let_go_of_streams()
            with contextlib.suppress(OSError):  # the daemon says it too, unless it is gone
                client.send_line(conn, {"exit": code})
            # The command's sandboxes are closed and its work directory removed now, after
            # the client went (its going makes the daemon interrupt this worker: not now),
            # then the exit handlers run (exits.finish)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            run_deferred()
            with contextlib.suppress(Exception):
                finish()
        finally:
            # even when interrupted meanwhile (once the client has its code it goes, and the
            # daemon then sends SIGINT): a fork that got back into the daemon's loop would
            # shut "the daemon" down, removing its socket
            os._exit(code)


def _let_go_of_streams() -> None:
    """Point descriptors 0-2 at /dev/null (the output is flushed): whoever reads the client's
    output (a pipe, `$(ooda run ...)`) sees its end when the client exits, not only once this
    process is gone (a forked worker's exit frees its memory first, which takes a while)."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)


def _reopen_std_streams() -> None:
    """sys.std* on the client's descriptors, buffered as Python would have buffered them."""
    encoding = sys.stdout.encoding if sys.stdout is not None else "utf-8"
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding=encoding)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=encoding,
                                  line_buffering=os.isatty(1), write_through=False)
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=encoding,
                                  errors="backslashreplace", line_buffering=True)


# --------------------------------------------------------------------------- start-up


def preload() -> None:
    """Import what commands need and build the HTTP machinery once, before any fork."""
    for name in PRELOAD:
        importlib.import_module(name)
    from ooda.agent.cli import app as cli
    from ooda.agent.contracts.stages import STAGES
    from ooda.agent.models.http_client import exercise_http_client
    from ooda.verifiers.runners import runners

    for stage in STAGES:  # the cascade builds its stages from the registry, lazily
        importlib.import_module(stage.module)
    exercise_http_client()
    runners()  # the test runners' table (imports each runner module)
    commands.register(cli.app)
    cli.warm_parsers(cli.click_command())


def main(argv: list[str]) -> int:
    key = argv[0] if argv else ""
    if key != client.daemon_key():
        return 0  # started for another code version or environment: not ours to serve
    files = client.paths(key)
    lock_fd = os.open(files["lock"], os.O_RDWR | os.O_CREAT, 0o600)
    for attempt in range(5):  # a client may hold it shared for an instant (daemon_client)
        try:
            fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt == 4:
                return 0  # another daemon of this key is starting or serving
            time.sleep(0.01)
    os.set_inheritable(lock_fd, False)
    started = time.monotonic()
    preload()
    with contextlib.suppress(FileNotFoundError):
        files["sock"].unlink()  # left by a daemon that was killed (we hold the lock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(files["sock"]))
    files["sock"].chmod(0o600)
    daemon = Daemon(key, listener, lock_fd, files)
    signal.signal(signal.SIGTERM, lambda *_: setattr(daemon, "stop_requested", True))
    daemon.keep_warm()
    if threading.active_count() != 1:
        log("threads running after preload: not forking from this process")
        return 1
    gc.collect()
    gc.freeze()  # workers share these pages and never scan them
    listener.listen(16)
    log(f"ready in {time.monotonic() - started:.2f} s (key {key}, idle exit {IDLE_S:g} s)")
    daemon.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
