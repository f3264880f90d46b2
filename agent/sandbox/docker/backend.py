"""The `docker` backend: one locked-down, long-lived container per sandbox, warm and reusable.

The container has no network, no capabilities, a read-only root, a private /tmp, pids, memory
and CPU limits, runs as uid 1000, and sees only an allow-listed environment. Its PID 1 is
agent/sandbox/docker/zygote.py: a command server that imported pytest and mypy ahead of need and that
signals cannot reach from inside. Commands go to it over a unix socket the host listened on
just once (so no candidate can connect to it later); each runs in a forked child, and once it
ends (or times out) every other process in the container is SIGKILLed, so nothing outlives a
command. If a command does not end shortly after its timeout, the host kills the container and
the sandbox refuses further runs with an error result. While a command runs, the host watches
what it writes to the workspace (agent/sandbox/limits.py) and asks PID 1 to end it past the
allowance; PID 1 reports memory cgroup OOM kills: both end the output with a line saying so.

`reset()` makes the container as fresh as a new one (processes, /tmp, /dev/shm, IPC) and
`lend()` hands a refilled workspace back to the sandbox user: agent/sandbox/pool.py reuses
containers across candidates with them.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError, SandboxBroken
from ooda.agent.contracts.protocols import ExecResult
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.docker import zygote
from ooda.agent.sandbox.docker.launch import (
    WORKDIR,
    Engine,
    Launched,
    SdkEngine,
    connect,
    launch,
    sandbox_user,
)
from ooda.agent.sandbox.limits import POLL_S, DiskWatch, configured, disk_note, memory_note
from ooda.agent.sandbox.output import DEFAULT_CAP_BYTES
from ooda.agent.sandbox.ownership import Lease, chown_tree
from ooda.agent.support.env_numbers import positive_from_env

HOST_GRACE_S = 5.0
"""How long past its timeout the host waits for a command before killing the container."""


def start_timeout_s() -> float:
    """How long a new container may take to connect back and import its toolchain; also the
    extra grace of a command whose tool PID 1 may still have to import first (it counts that
    import in the command's own time, and answers once the command is ended: an import cannot
    be interrupted, and on a loaded machine pytest's takes 10-15 s). OODA_SANDBOX_START_TIMEOUT,
    else 120 s (a UsageError when not a positive number)."""
    return positive_from_env("OODA_SANDBOX_START_TIMEOUT", 120.0, float,
                             "the seconds a sandbox container may take to start")


RESET_TIMEOUT_S = 30.0
CLOSE_WAIT_S = 3.0
"""How long close() waits for an idle container's PID 1 to exit before force-removing it."""


class DockerBackend:
    """Opens DockerSandboxes from the ooda image (built on first use).

    Containers are started, killed and removed through the docker SDK (launch.SdkEngine)."""

    name = "docker"
    reusable = True
    """Its sandboxes can be reset for another candidate (see agent/sandbox/pool.py)."""

    @property
    def workspace_owner(self) -> tuple[int, int]:
        """Who a workspace's files belong to in the sandbox (agent/sandbox/overlay.py)."""
        return sandbox_user()

    def __init__(self, client: Any | None = None, *, log: image.Log = image.stderr_log) -> None:
        self.log = log
        self._client = client
        self._lock = threading.Lock()
        self.image = docker_image.ensure_docker_image(self.client, log=log)
        self.engine: Engine = SdkEngine(self.client.api)
        docker_image.remember_tag(self.image)

    @property
    def client(self) -> Any:
        """The docker SDK client, connected on first use."""
        with self._lock:
            if self._client is None:
                self._client = connect()
            return self._client

    def open(self, workspace: Path, *, requirements: Path | None = None) -> DockerSandbox:
        tag = self.image
        if requirements is not None:
            tag = docker_image.ensure_requirements_image(self.client, requirements, self.log)
        with_reqs = requirements is not None
        return DockerSandbox(self.engine, tag, workspace, with_requirements=with_reqs)

    def open_image(
        self, workspace: Path, tag: str, env: dict[str, str] | None = None
    ) -> DockerSandbox:
        """A sandbox on another image of ours (a task's environment, `ooda-env:<hash>`), with
        `env` added to its container's environment."""
        return DockerSandbox(self.engine, tag, workspace, env=env)

    def adopt(self, launched: object, *, requirements: Path | None = None) -> DockerSandbox | None:
        """The sandbox on `launched` (a launch.Launched: a container started ahead of need on
        the image used last, agent/startup/prestart.py), when that is still this backend's
        image and the task has no requirements; None when it does not fit or its PID 1 did not
        connect (the caller releases it: its PID 1 exits and Docker removes the container)."""
        if not isinstance(launched, Launched) or requirements is not None:
            return None
        if launched.tag != self.image:
            return None
        try:
            return DockerSandbox(self.engine, "", launched.workspace, launched=launched)
        except Exception:  # the pool starts its own
            return None

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class _Command:
    """One command while it runs: what its watcher thread waits on."""

    def __init__(self) -> None:
        self.wake = threading.Event()
        self.done = False
        self.interrupted = False


class DockerSandbox:
    """One container; `run` asks its PID 1 to run a command; `close` ends it."""

    backend = "docker"
    workdir = WORKDIR

    def __init__(
        self,
        engine: Engine,
        tag: str,
        workspace: Path,
        *,
        with_requirements: bool = False,
        launched: Launched | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        """Start a container on `workspace` (or adopt `launched`, one started already on it,
        e.g. by agent/startup/prestart.py) and wait for its PID 1 to connect."""
        self.workspace = workspace
        self.limits = configured()
        self._engine = engine
        self._broken: str | None = None
        """Why the sandbox refuses commands (reset() then fails and the pool discards it)."""
        self._killed = False
        """The host killed the container because a command outlived its timeout."""
        self._imported: set[str] = set()
        """The tools PID 1 has answered a command with (imported by then)."""
        self._closed = False
        self._one_at_a_time = threading.Lock()  # each run ends by killing every other process
        self._command: _Command | None = None
        """The command running, while one runs (interrupt() reaches it)."""
        self.container_id = ""
        if launched is None:
            try:
                launched = launch(engine, tag, workspace, with_requirements=with_requirements,
                                  extra_env=env)
            except OSError as exc:  # the control socket
                raise InfraError(f"could not start a sandbox container from {tag}: {exc}") from exc
        self.container_id = launched.container_id
        self._uid, self._gid = launched.uid, launched.gid
        self._started_as = (launched.tag, launched.env)
        self._lease = Lease(workspace, launched.uid, launched.gid)
        try:
            if launched.connected is not None:  # handed back by an earlier command, reset
                self._sock, launched.connected = launched.connected, None
            else:
                assert launched.listener is not None
                self._sock = self._accept(launched.listener)
        except BaseException:
            self._discard()
            self._lease.release()
            raise
        finally:
            launched.release()

    def _accept(self, listener: socket.socket) -> socket.socket:
        """The one connection PID 1 makes as soon as it runs."""
        listener.settimeout(start_timeout_s())
        try:
            conn, _ = listener.accept()
        except TimeoutError as exc:
            raise InfraError(
                f"the sandbox container did not start within {start_timeout_s():g} s"
            ) from exc
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, peer_uid, _gid = struct.unpack("3i", creds)
        if os.geteuid() == 0 and peer_uid != self._uid:
            conn.close()
            raise InfraError(f"unexpected peer uid {peer_uid} on the sandbox control socket")
        conn.settimeout(start_timeout_s())
        try:
            hello = zygote.receive(conn)
        except OSError:
            hello = None
        if hello is None:
            conn.close()
            raise InfraError("the sandbox container exited while starting")
        return conn

    # ------------------------------------------------------------------ commands

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout_s: float,
        env: Mapping[str, str] | None = None,
        cap_bytes: int = DEFAULT_CAP_BYTES,
    ) -> ExecResult:
        with self._one_at_a_time:
            return self._run(argv, timeout_s, env or {}, cap_bytes)

    def _run(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str], cap_bytes: int
    ) -> ExecResult:
        start = time.monotonic()
        if self._closed:
            return ExecResult(125, "sandbox unusable: it was closed", 0.0)
        if self._broken:
            return self._unusable(0.0)
        timeout_s = max(timeout_s, 0.0)
        request = {"op": "run", "argv": list(argv), "env": dict(env), "cwd": self.workdir,
                   "timeout": timeout_s, "cap": cap_bytes}
        disk = DiskWatch(self.workspace, self.limits.disk)
        command = self._command = _Command()
        tools = zygote.wanted_tools([str(a) for a in argv], list(zygote.TOOLS))
        importing = [t for t in tools if t not in self._imported]
        try:
            self._sock.settimeout(timeout_s + HOST_GRACE_S + (start_timeout_s() if importing else 0))
            zygote.send(self._sock, json.dumps(request).encode())
            watcher = threading.Thread(target=self._watch, args=(disk, command), daemon=True)
            watcher.start()
            try:
                header = zygote.receive(self._sock)
                output = zygote.receive(self._sock) if header is not None else None
            finally:
                command.done = True
                command.wake.set()
                watcher.join()
                self._command = None
        except TimeoutError:
            self._broken = f"a command outlived its {timeout_s:g} s timeout; container killed"
            self._killed = True
            self._kill()
            return ExecResult(None, "", time.monotonic() - start, timed_out=True)
        except OSError as exc:
            header = output = None
            self._broken = f"the container went away ({exc})"
        duration = time.monotonic() - start
        if header is None or output is None:
            self._broken = self._broken or (
                "it was closed" if self._closed else "the container went away"
            )
            return self._unusable(duration)
        info = json.loads(header)
        text = output.decode("utf-8", "replace")
        self._imported.update(tools)
        if info.get("timed_out"):
            return ExecResult(None, text, duration, timed_out=True)
        code = int(info["exit"]) if info.get("exit") is not None else 125
        over = (info.get("cancelled") and not command.interrupted) or disk.exceeded()
        broke = [disk_note(disk.limit)] if over else []
        if info.get("oom"):
            broke.append(memory_note(self.limits.memory))
        if broke:
            text = "\n".join([text.rstrip(), *broke, ""]).lstrip()
            code = code if code > 0 else 137
        return ExecResult(code, text, duration, limit=broke[0] if broke else None)

    def _unusable(self, duration_s: float) -> ExecResult:
        """The answer to a command this sandbox could not run. Once closed, or after a command
        outlived its timeout (the host killed the container: the candidate's doing), an exit
        125 result whose output starts "sandbox unusable: "; when the container went away on
        its own (engine restarted, container removed), SandboxBroken: not the candidate's fault."""
        why = (self._broken or "it was closed").strip().splitlines()[0]
        if self._killed or why == "it was closed":
            return ExecResult(125, f"sandbox unusable: {why}", duration_s)
        raise SandboxBroken(f"the docker sandbox broke while verifying: {why}")

    def _watch(self, disk: DiskWatch, command: _Command) -> None:
        """While a command runs: past its disk allowance, or once interrupted, ask PID 1 to
        end it (a request that arrives after the command ended is ignored there)."""
        over_disk = False
        while not over_disk and not command.wake.wait(POLL_S):
            over_disk = disk.exceeded()
        if over_disk or (command.interrupted and not command.done):
            with contextlib.suppress(OSError):
                zygote.send(self._sock, b'{"op": "cancel"}')

    def interrupt(self) -> None:
        """End the command running now, if one is (another thread's call: the run it is part
        of was decided); its result then says exit 137. Nothing else changes: the sandbox
        stays usable, as after any command."""
        command = self._command
        if command is not None and not command.done:
            command.interrupted = True
            command.wake.set()

    # ------------------------------------------------------------------ reuse

    def reset(self) -> bool:
        """Make the container fresh for another candidate: no process, empty /tmp, /dev/shm,
        /dev/mqueue, no IPC objects. False when that failed (then discard the sandbox).
        The host empties and refills the workspace itself (see lend())."""
        with self._one_at_a_time:
            if self._closed or self._broken:
                return False
            try:
                self._sock.settimeout(RESET_TIMEOUT_S)
                zygote.send(self._sock, b'{"op": "reset"}')
                answer = zygote.receive(self._sock)
            except OSError as exc:
                self._broken = f"reset failed ({exc})"
                return False
            if answer is None or not json.loads(answer).get("ok"):
                self._broken = f"reset left state behind: {answer!r}"
                return False
            return True

    def lend(self) -> None:
        """Hand the (refilled) workspace to the sandbox user again."""
        if self._lease.active:
            chown_tree(self.workspace, self._uid, self._gid)

    # ------------------------------------------------------------------ teardown

    def hand_over(self) -> Launched | None:
        """Give up this idle container without ending it, for another command of the same
        user to adopt (agent/startup/daemon.py keeps it warm): reset as between two candidates
        (no process, empty /tmp, HOME, /dev/shm, IPC; the caller empties the workspace), the
        workspace given back to its owner, this object closed. The container as a Launched
        holding PID 1's connection (`connected`), or None when it is not fit to be reused
        (broken, killed, closed, a command running, the reset failed): then close() it."""
        if self._closed or self._killed or not self.reset():
            return None
        if not self._one_at_a_time.acquire(blocking=False):
            return None
        try:
            self._closed = True  # close() now only gives the workspace back (done here)
        finally:
            self._one_at_a_time.release()
        self._lease.release()
        tag, env = self._started_as
        return Launched(self.container_id, tag, None, None, self.workspace, env, self._uid,
                        self._gid, connected=self._sock)

    def _kill(self) -> None:
        with contextlib.suppress(InfraError):  # the engine went away: so did the container
            self._engine.kill(self.container_id)

    def _discard(self) -> None:
        if self.container_id:
            with contextlib.suppress(InfraError):  # gone already (cleanup, engine restart)
                self._engine.remove(self.container_id)

    def close(self) -> None:
        """End the container. When idle, closing the socket is enough: PID 1 reads the end,
        exits (which kills everything left in the container) and Docker removes it (auto-
        remove); the host only waits for PID 1's side to close. Otherwise (a command running,
        no answer) the container is force-removed through the engine."""
        if not self._closed:
            self._closed = True
            sock = getattr(self, "_sock", None)
            exited = False
            if sock is not None and self._one_at_a_time.acquire(blocking=False):
                try:
                    exited = self._end_idle(sock)
                finally:
                    self._one_at_a_time.release()
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)  # wakes a run() waiting for an answer
            if not exited:
                self._discard()
            if sock is not None:
                with self._one_at_a_time:
                    sock.close()
        self._lease.release()

    def _end_idle(self, sock: socket.socket) -> bool:
        """Half-close the socket and wait (briefly) for PID 1 to exit; True when it did."""
        if self._broken:
            return False
        try:
            sock.shutdown(socket.SHUT_WR)
            sock.settimeout(CLOSE_WAIT_S)
            return sock.recv(1) == b""
        except OSError:  # timed out, or reset: let the engine make sure
            return False
