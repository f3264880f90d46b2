"""The warm `ooda` daemon: the SDKs imported once, a sandbox container started ahead, a forked
worker per command.

`python -m ooda.agent.startup.daemon KEY` (started in the background by agent/startup/entry.py after a command ran
without one) imports everything `ooda run` needs, starts WARM_CONTAINERS Docker sandbox
containers for the image used last (one at a time, each started by a forked process while the
loop goes on serving), binds its socket and waits. Each command that agent/startup/client.py
hands over gets a forked worker: the client's stdin/stdout/stderr, working directory,
environment, umask and argv, and the waiting containers that are ready, then the ordinary
`ooda` command line runs in it (a run's pool adopts them: with two, a single candidate's
after-tests stages run beside its tests, agent/verify/spare.py). A warm container is started
by a short-lived forked process (the Docker API's create and start take 0.3-0.5 s), so the
serving loop never blocks on it: a command arriving meanwhile is forked at once, with the
containers that are ready.
The daemon reaps the worker and sends its exit code back; a client that goes away gets its
worker interrupted (SIGINT, as Ctrl-C would).

The daemon itself stays single-threaded (it forks), takes only its own user's connections
(SO_PEERCRED), and exits after OODA_DAEMON_IDLE_S seconds without a command (default 1800),
on `ooda daemon stop`, or when its lock is taken by another daemon of the same key.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
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

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.docker import image
from ooda.agent.sandbox.docker.launch import Launched, SdkEngine, prepare_on_last_image
from ooda.agent.sandbox.registry import cleanup_leftovers
from ooda.agent.startup import client, commands, entry, handoff
from ooda.agent.support import phases
from ooda.agent.support.env_numbers import positive_from_env
from ooda.agent.support.exits import finish, flush_output, run_deferred

REUSE = os.environ.get("OODA_DAEMON_REUSE", "1") != "0"
"""Whether commands give the warm containers back for the next one (OODA_DAEMON_REUSE=0:
every command gets containers no other command used; part of the daemon's key)."""
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
    """A started sandbox container nobody has taken yet, and the directory holding its slot;
    `starting`: while a forked process starts it (its pid, and the pipe its id comes through)."""

    work: Path
    launched: Launched
    starting: tuple[int, int] | None = None

    def ready(self) -> bool:
        """Its PID 1 has connected (a command can use it without waiting)."""
        if self.starting is not None:  # its id not known yet
            return False
        if self.launched.connected is not None:  # handed back by a command
            return not self.gone()
        assert self.launched.listener is not None
        readable, _, _ = select.select([self.launched.listener], [], [], 0)
        return bool(readable)

    def gone(self) -> bool:
        """A container handed back whose PID 1 has exited (the engine killed it: its end of
        the connection closed; PID 1 never writes unasked)."""
        conn = self.launched.connected
        return conn is not None and bool(select.select([conn], [], [], 0)[0])

    def discard(self) -> None:
        self.give_away()  # PID 1 sees the socket close and exits; Docker removes it
        self.launched.release()
        shutil.rmtree(self.work, ignore_errors=True)

    def give_away(self) -> None:
        """After a fork that handed it on: drop this process's copy, keep the files."""
        for sock in (self.launched.listener, self.launched.connected):
            if sock is not None:
                sock.close()
        if self.starting is not None:
            os.close(self.starting[1])
            self.starting = None

    def started(self) -> str | None:
        """Read what the process starting it said (its pipe is readable): None when the
        container runs (its id kept), else why not."""
        assert self.starting is not None
        pipe = self.starting[1]
        try:
            said = os.read(pipe, 4096).decode(errors="replace")
        finally:
            os.close(pipe)
            self.starting = None
        kind, _, rest = said.partition(" ")
        if kind == "id" and rest:
            self.launched.container_id = rest.strip()
            return None
        return rest or "the process starting it died"


def handed_back(info: dict[str, object], fds: list[int]) -> WarmContainer:
    """The container a worker gave back (give_back), from its description and PID 1's
    connection (received as a descriptor; duplicated, the caller closes what it received)."""
    env = info["env"]
    assert isinstance(env, dict) and len(fds) == 1
    launched = Launched(
        str(info["container_id"]), str(info["tag"]), None, None, Path(str(info["workspace"])),
        {str(k): str(v) for k, v in env.items()}, int(str(info["uid"])), int(str(info["gid"])),
        connected=socket.socket(fileno=os.dup(fds[0])))
    return WarmContainer(Path(str(info["work"])), launched)


def give_back(sock_path: Path, work: Path, sandbox: object) -> bool:
    """In a worker: hand a container the daemon gave back to it, idle (`sandbox`, a
    DockerSandbox adopted from it; `work`, the directory holding its slot), for the next
    command: reset as between two candidates, its slot emptied, PID 1's connection sent to
    the daemon. False when it is not fit or the daemon takes no more (then it is ended)."""
    from ooda.agent.sandbox.docker.backend import DockerSandbox
    from ooda.agent.sandbox.pool import empty_dir

    if not isinstance(sandbox, DockerSandbox) or sandbox.workspace.parent != work:
        return False
    kept = sandbox.hand_over()
    if kept is None or kept.connected is None:
        return False
    conn = kept.connected
    try:
        empty_dir(kept.workspace)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
            daemon.settimeout(5.0)
            daemon.connect(str(sock_path))
            info = {"work": str(work), "workspace": str(kept.workspace),
                    "container_id": kept.container_id, "tag": kept.tag, "env": kept.env,
                    "uid": kept.uid, "gid": kept.gid}
            handoff.send_request(daemon, {"control": "adopt", "container": info,
                                         "worker": os.getpid()}, [conn.fileno()])
            answer = json.loads(daemon.makefile("rb").readline() or b"{}")
        return bool(answer.get("adopted"))
    except (OSError, ValueError):
        return False
    finally:
        conn.close()  # this process's copy (the daemon's keeps PID 1 waiting; else it exits)


WARM_CONTAINERS = 2
"""Containers kept started for the next command: a run's default verify concurrency."""
RETURN_WAIT_S = 1.0
"""How long a command arriving while the one before is tidying up waits at most for the
containers it is giving back (the usual wait: milliseconds; a container started instead takes
~0.5 s and its tools as long again)."""


def start_warm(clean_leftovers: bool, not_inherited: list[int]) -> WarmContainer | None:
    """A container on the image used last, for tasks without requirements (None: no image),
    being started by a forked process (WarmContainer.starting) that first removes what dead
    processes left behind when `clean_leftovers`; `not_inherited`: descriptors that process
    closes (the daemon's listener and clients)."""
    prepared = prepare_on_last_image("ooda-daemon-")  # here: the daemon owns the container
    if prepared is None:
        return None
    work, launched, config = prepared
    try:
        pipe, said = os.pipe()
        pid = os.fork()
    except BaseException:
        launched.release()
        shutil.rmtree(work, ignore_errors=True)
        raise
    if pid == 0:
        os.close(pipe)
        for fd in not_inherited:
            with contextlib.suppress(OSError):
                os.close(fd)
        _start_container(said, config, clean_leftovers)
    os.close(said)
    return WarmContainer(work, launched, (pid, pipe))


def _start_container(said: int, config: dict[str, object], clean_leftovers: bool) -> NoReturn:
    """In the forked process: start the container of `config`, write "id ID" (or "error
    WHY") to the pipe `said`, exit."""
    message = "error the container was not started"
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the daemon's Ctrl-C is not for this
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if clean_leftovers:
            cleanup_leftovers()
        message = "id " + SdkEngine.connect(timeout_s=5.0).start(config)
    except BaseException as exc:  # noqa: BLE001 - said to the daemon, which logs it
        message = f"error {exc}"[:4000]
    finally:
        with contextlib.suppress(OSError):
            os.write(said, message.encode())
        os._exit(0)


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
    starters: set[int] = field(default_factory=set)
    """Processes that started a warm container, not yet reaped."""
    next_warm_try: float = 0.0
    served: int = 0
    returned: int = 0
    lent: dict[int, int] = field(default_factory=dict)
    """Worker pid -> how many of the warm containers it was given may still come back."""
    pending: list[tuple[socket.socket, dict[str, object], list[int], float]] = field(
        default_factory=list)
    """Commands waiting (until a deadline) for containers on their way back."""
    """Containers commands handed back (reused instead of starting new ones)."""
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
                    if idle >= idle_exit_s():
                        log(f"idle for {idle:.0f} s: exiting")
                        return
                    self.keep_warm()
                self.start_pending()
                pipes = [w.starting[1] for w in self.warm if w.starting is not None]
                watched: list[socket.socket | int] = [*self.watched(), *pipes]
                readable, _, _ = select.select(watched, [], [], self._turn_s())
                # hang-ups first: a client that got its exit code and the next command's
                # connection arrive together when commands run back to back
                for ready in sorted(readable, key=lambda ready: ready is self.listener):
                    if isinstance(ready, int):
                        self.warm_started(ready)
                    elif ready is self.listener:
                        self.accept()
                    else:
                        self.client_gone(ready)
        finally:
            self.shutdown()

    def watched(self) -> list[socket.socket]:
        """What a loop turn waits on: the listener (unless stopping) and the connections of
        clients still there. A client that hung up stays readable (EOF) until its worker is
        reaped: watched, it would make every turn return at once, a busy loop taking a core
        from the worker tidying up and from the next command (10-120 ms after each command
        on a loaded machine, before)."""
        waiting = [self.listener] if not self.stopping else []
        return waiting + [conn for pid, conn in self.workers.items() if pid not in self.interrupted]

    def _turn_s(self) -> float:
        """How long a loop turn waits for a connection (or a warm container's start): not at
        all when another warm container is to be started."""
        if self.pending:
            return 0.005
        if self.workers:
            return 0.05
        return 0.0 if self.to_start() else 1.0

    def to_start(self) -> bool:
        """Whether keep_warm would start a container now."""
        return (not self.stopping and len(self.warm) < WARM_CONTAINERS
                and all(w.starting is None for w in self.warm)
                and time.monotonic() >= self.next_warm_try and image.last_tag() is not None)

    def keep_warm(self) -> None:
        """Begin one more warm container's start while fewer than WARM_CONTAINERS wait, none is
        being started and the image used last is known."""
        tag = image.last_tag()
        for stale in [w for w in self.warm
                      if w.starting is None and (w.launched.tag != tag or w.gone())]:
            stale.discard()  # `ooda sandbox build` made a new image, or the engine killed it
            self.warm.remove(stale)
        if not self.to_start():
            return
        clients = [*self.workers.values(), *(conn for conn, *_ in self.pending)]
        try:
            # first, what killed workers or earlier processes left behind
            started = start_warm(clean_leftovers=not self.warm, not_inherited=[
                self.listener.fileno(), *(conn.fileno() for conn in clients)])
        except Exception as exc:  # noqa: BLE001 - commands start their own; try again later
            log(f"no warm container: {exc}")
            self.next_warm_try = time.monotonic() + 30.0
            return
        if started is not None:  # else no image yet
            self.warm.append(started)
            assert started.starting is not None
            self.starters.add(started.starting[0])

    def warm_started(self, pipe: int) -> None:
        """The process starting a warm container said how it went (its pipe is readable)."""
        warm = next(w for w in self.warm if w.starting is not None and w.starting[1] == pipe)
        problem = warm.started()
        if problem is not None:  # no engine now: commands start their own; try again later
            log(f"no warm container: {problem}")
            self.next_warm_try = time.monotonic() + 30.0
        if problem is not None or len(self.warm) > WARM_CONTAINERS:  # (containers came back)
            self.warm.remove(warm)
            warm.discard()

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
            if control == "adopt":
                self.adopt(conn, request, fds)
                conn.close()
                return
            if control == "tidied":  # a worker gave back all it will
                self.lent.pop(int(str(request.get("worker", 0))), None)
                conn.close()
                return
            if control is not None:
                self.answer_control(conn, str(control))
                conn.close()
                return
            if self.returns_awaited():
                self.pending.append((conn, request, fds, time.monotonic() + RETURN_WAIT_S))
                fds = []  # the command's: kept until it starts
                return
        except Exception as exc:  # a bad or vanished client: drop it, nothing was started
            log(f"dropped a connection: {exc}")
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        try:
            self.start(conn, request, fds)
        finally:
            for fd in fds:  # the worker has its own
                os.close(fd)

    def returns_awaited(self) -> bool:
        """Whether a command arriving now should wait for containers on their way back: fewer
        than WARM_CONTAINERS wait ready, and a worker whose client has its exit code (the
        client hung up) still holds some it was given (it hands them back as it tidies up,
        within milliseconds; a container started now would take far longer)."""
        if sum(1 for w in self.warm if w.ready()) >= WARM_CONTAINERS:
            return False
        tidying = {pid for pid, conn in self.workers.items() if pid in self.interrupted}
        return any(count > 0 for pid, count in self.lent.items() if pid in tidying)

    def start_pending(self) -> None:
        """Start the commands that waited for containers on their way back, once those are
        back, no worker tidying up holds any, or RETURN_WAIT_S passed."""
        while self.pending:
            conn, request, fds, deadline = self.pending[0]
            awaited = self.returns_awaited()
            if awaited and time.monotonic() < deadline:
                return
            self.pending.pop(0)
            waited = time.monotonic() - (deadline - RETURN_WAIT_S)
            ready = sum(1 for w in self.warm if w.ready())
            log(f"a command waited {waited * 1000:.0f} ms for containers coming back: "
                f"{ready} ready" + (" (gave up)" if awaited else ""))
            try:
                self.start(conn, request, fds)
            finally:
                for fd in fds:
                    os.close(fd)

    def start(self, conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        """Fork a worker for the command `request` (fds: the client's stdin/stdout/stderr),
        handing it the warm containers that are ready."""
        try:
            offers = [w for w in self.warm if w.ready()]
            pid = os.fork()
            if pid == 0:
                self.listener.close()
                for other in self.workers.values():
                    other.close()
                for waiting, *_ in self.pending:
                    waiting.close()
                for kept in self.warm:
                    if kept not in offers:
                        kept.give_away()
                run_worker(conn, request, fds, offers, self.lock_fd, self.files["sock"])
        except Exception as exc:  # nothing was started
            log(f"dropped a connection: {exc}")
            conn.close()
            return
        for offer in offers:
            offer.give_away()
            self.warm.remove(offer)
        self.workers[pid] = conn
        if offers and REUSE:  # (OODA_DAEMON_REUSE=0: none comes back, none is waited for)
            self.lent[pid] = len(offers)
        self.served += 1
        self.last_activity = time.monotonic()
        try:
            conn.settimeout(5.0)
            client.send_line(conn, "pid", pid)
        except OSError:
            self.client_gone(conn)
        self.write_status()

    def adopt(self, conn: socket.socket, request: dict[str, object], fds: list[int]) -> None:
        """A worker hands back a container it was given, reset: kept warm for the next
        command while fewer than WARM_CONTAINERS wait (on the image used last), else ended."""
        info = request.get("container")
        kept = sum(1 for w in self.warm if w.starting is None)  # one being started: extra
        taken = (not self.stopping and kept < WARM_CONTAINERS and len(fds) == 1
                 and isinstance(info, dict) and info.get("tag") == image.last_tag())
        worker = int(str(request.get("worker", 0)))
        if worker in self.lent:
            self.lent[worker] -= 1
        if taken:
            assert isinstance(info, dict)
            self.warm.append(handed_back(info, fds))
            self.returned += 1
        conn.sendall(json.dumps({"adopted": taken}).encode() + b"\n")

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
        while self.workers or self.starters:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid in self.starters:
                self.starters.discard(pid)
                continue
            conn = self.workers.pop(pid, None)
            self.interrupted.discard(pid)
            self.lent.pop(pid, None)
            self.last_activity = time.monotonic()
            if conn is None:
                continue
            code = os.waitstatus_to_exitcode(status)
            with contextlib.suppress(OSError):
                client.send_line(conn, "exit", code if code >= 0 else 128 - code)
            conn.close()

    def stop(self) -> None:
        """Take no more commands; exit once the running ones are done."""
        if not self.stopping:
            self.stopping = True
            self.listener.close()
            with contextlib.suppress(FileNotFoundError):
                self.files["sock"].unlink()

    def status(self) -> dict[str, object]:
        """What `ooda daemon status` says (warm containers: those started; ready: those whose
        PID 1 has connected, what the next command is given)."""
        started = sum(1 for w in self.warm if w.starting is None)
        return {
            "pid": os.getpid(), "key": self.key, "served": self.served,
            "running": len(self.workers), "started": self.started, "idle_exit_s": idle_exit_s(),
            "warm_container": started > 0, "warm_containers": started,
            "ready_containers": sum(1 for w in self.warm if w.ready()),
            "handed_back": self.returned,
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
        for conn, _request, fds, _deadline in self.pending:  # their clients run them
            conn.close()
            for fd in fds:
                os.close(fd)
        self.pending.clear()
        for warm in self.warm:
            # a start under way ends first: were its directories removed before, the engine
            # would make them again (a bind's missing source) and leave them behind
            if warm.starting is not None and select.select([warm.starting[1]], [], [], 10)[0]:
                warm.started()
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
    sock_path: Path,
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
            give_back=functools.partial(give_back, sock_path) if REUSE else None,
        )
    except BaseException:  # noqa: BLE001 - a worker never returns into the daemon's loop
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        try:
            flush_output()
            _let_go_of_streams()
            # The command's sandboxes are closed (the daemon's given back) and its work
            # directory removed after the client has its code; the client's going then makes
            # the daemon interrupt this worker: not now (ignored from before the code is sent,
            # or the tidying-up could be cut short), then the exit handlers run (exits.finish)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            with contextlib.suppress(OSError):  # the daemon says it too, unless it is gone
                client.send_line(conn, "exit", code)
            run_deferred()
            tidied(sock_path)
            with contextlib.suppress(Exception):
                finish()
        finally:
            # even when interrupted meanwhile (once the client has its code it goes, and the
            # daemon then sends SIGINT): a fork that got back into the daemon's loop would
            # shut "the daemon" down, removing its socket
            os._exit(code)


def tidied(sock_path: Path) -> None:
    """Tell the daemon this worker gave back every container it will (a command waiting
    for them starts now)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as daemon:
        daemon.settimeout(2.0)
        daemon.connect(str(sock_path))
        handoff.send_request(daemon, {"control": "tidied", "worker": os.getpid()}, [])


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
    from ooda.agent.sandbox import image as recipe
    from ooda.agent.verify import basecache
    from ooda.verifiers.runners import runners

    for stage in STAGES:  # the cascade builds its stages from the registry, lazily
        importlib.import_module(stage.module)
    exercise_http_client()
    runners()  # the test runners' table (imports each runner module)
    commands.register(cli.app)
    cli.warm_parsers(cli.click_command())
    recipe.recipe_hash()  # the sandbox image's recipe (the toolchain's versions): kept per process
    basecache.own_code()  # ooda's files, in the base cache's keys (a walk of ~350 files)


def idle_exit_s() -> float:
    """OODA_DAEMON_IDLE_S, else 1800 s (a UsageError when not a positive number)."""
    return positive_from_env("OODA_DAEMON_IDLE_S", 1800.0, float,
                             "the seconds the daemon waits idle before it exits")


def main(argv: list[str]) -> int:
    try:
        idle_exit_s()
    except UsageError as exc:  # nothing started: commands run in their own process
        log(str(exc))
        return 2
    key = argv[0] if argv else ""
    if key != handoff.daemon_key():
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
    log(f"ready in {time.monotonic() - started:.2f} s (key {key}, idle exit {idle_exit_s():g} s)")
    daemon.serve()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
