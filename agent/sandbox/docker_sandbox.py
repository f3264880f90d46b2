"""The `docker` backend: one locked-down, long-lived container per sandbox, commands by exec.

The container has no network, no capabilities, a read-only root, a private /tmp, pids, memory
and CPU limits, runs as uid 1000, and sees only an allow-listed environment. Its PID 1 is a tiny
reaper that signals cannot reach from inside. Every command runs under an in-container
supervisor that enforces the timeout and then SIGKILLs every other process in the container
(setsid'd and double-forked ones too), so nothing outlives a command. If a command still does
not end shortly after its timeout, the host kills the whole container and the sandbox refuses
further runs with an error result.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agent.errors import InfraError
from agent.protocols import ExecResult
from agent.sandbox import image
from agent.sandbox.output import DEFAULT_CAP_BYTES, CappedBuffer
from agent.sandbox.ownership import Lease

MEMORY_LIMIT = "2g"
CPUS = float(os.environ.get("OODA_SANDBOX_CPUS", "1"))
PIDS_LIMIT = 256
TMP_SIZE = "256m"
FILE_SIZE_LIMIT = 1 << 30
HOST_GRACE_S = 5.0
"""How long past its timeout the host waits for a command before killing the container."""

BASE_ENV = {
    "PATH": image.SANDBOX_PATH,
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}

REAPER = """
import os, signal, time
signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
while True:
    try:
        os.wait()
    except ChildProcessError:
        time.sleep(0.2)
"""

SUPERVISOR = r"""
import os, signal, subprocess, sys, threading, time

def others():
    me, found = os.getpid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open("/proc/" + name + "/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state != "Z":
            found.append(name)
    return found

def sweep():
    for _ in range(400):
        if not others():
            return
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        time.sleep(0.005)

limit, cap, argv = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
head, tail, dropped = bytearray(), bytearray(), 0

def pump(pipe):
    global dropped
    half = cap // 2
    for chunk in iter(lambda: pipe.read1(1 << 20), b""):
        room = half - len(head)
        if room > 0:
            head.extend(chunk[:room])
            chunk = chunk[room:]
        tail.extend(chunk)
        if len(tail) > half:
            dropped += len(tail) - half
            del tail[: len(tail) - half]

try:
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
except FileNotFoundError:
    sys.stdout.write(argv[0] + ": command not found\n")
    sys.exit(127)
except OSError as exc:
    sys.stdout.write(argv[0] + ": " + exc.strerror + "\n")
    sys.exit(126)
reader = threading.Thread(target=pump, args=(child.stdout,), daemon=True)
reader.start()
try:
    code = child.wait(limit)
except subprocess.TimeoutExpired:
    code = 124
sweep()
reader.join(5)
out = sys.stdout.buffer
out.write(bytes(head))
if dropped:
    out.write(("\n[... %d bytes of output elided ...]\n" % dropped).encode())
out.write(bytes(tail))
out.flush()
os._exit(128 - code if code < 0 else code)
"""


def connect(timeout_s: float = 300.0) -> Any:
    """A docker SDK client whose engine answers, or InfraError saying what to do."""
    try:
        import docker

        client = docker.from_env(timeout=int(timeout_s), max_pool_size=64)
        client.ping()
    except Exception as exc:  # docker raises DockerException, requests errors, OSError...
        raise InfraError(
            f"Docker engine not answering ({type(exc).__name__}: {str(exc)[:200]}); start it "
            "(`systemctl start docker`, or `dockerd &` as root, see scripts/setup.sh) "
            "or use --sandbox bwrap"
        ) from exc
    return client


def docker_problem() -> str | None:
    """None when a Docker engine answers here, else why not (fast, for auto-detection)."""
    try:
        connect(timeout_s=5).close()
    except InfraError as exc:
        return str(exc)
    return None


class DockerBackend:
    """Opens DockerSandboxes from the ooda image (built on first use)."""

    name = "docker"

    def __init__(self, client: Any | None = None, *, log: image.Log = image.stderr_log) -> None:
        self.client = client if client is not None else connect()
        self.log = log
        self.image = image.ensure_docker_image(self.client, log=log)

    def open(self, workspace: Path, *, requirements: Path | None = None) -> DockerSandbox:
        tag = self.image
        if requirements is not None:
            tag = image.ensure_requirements_image(self.client, requirements, self.log)
        with_reqs = requirements is not None
        return DockerSandbox(self.client, tag, workspace, with_requirements=with_reqs)

    def close(self) -> None:
        self.client.close()


class DockerSandbox:
    """One container; `run` execs into it; `close` force-removes it."""

    backend = "docker"
    workdir = "/work"

    def __init__(
        self, client: Any, tag: str, workspace: Path, *, with_requirements: bool = False
    ) -> None:
        import docker.errors
        import docker.types

        self.workspace = workspace
        self._api = client.api
        self._broken: str | None = None
        self._closed = False
        self._one_at_a_time = threading.Lock()  # each run ends by killing every other process
        self._env = dict(BASE_ENV)
        if with_requirements:
            self._env["PYTHONPATH"] = image.REQS_MOUNT
        uid, gid = (image.SANDBOX_UID,) * 2 if os.geteuid() == 0 else (os.getuid(), os.getgid())
        self._user = f"{uid}:{gid}"
        self._lease = Lease(workspace, uid, gid)
        try:
            container = client.containers.run(
                tag,
                ["/usr/bin/python3", "-I", "-S", "-c", REAPER],
                detach=True,
                user=self._user,
                working_dir=self.workdir,
                environment=self._env,
                labels={"ooda": "1", **image.owner_labels()},
                hostname="sandbox",
                network_mode="none",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                read_only=True,
                volumes={str(workspace.resolve()): {"bind": self.workdir, "mode": "rw"}},
                tmpfs={"/tmp": f"size={TMP_SIZE},mode=1777,exec"},
                pids_limit=PIDS_LIMIT,
                mem_limit=MEMORY_LIMIT,
                memswap_limit=MEMORY_LIMIT,
                nano_cpus=int(CPUS * 1e9),
                ulimits=[docker.types.Ulimit(name="fsize", soft=FILE_SIZE_LIMIT,
                                             hard=FILE_SIZE_LIMIT)],
            )
        except docker.errors.DockerException as exc:
            self._lease.release()
            raise InfraError(f"could not start a sandbox container from {tag}: {exc}") from exc
        self.container_id: str = container.id

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
        import docker.errors

        start = time.monotonic()
        if self._closed:
            return ExecResult(125, "sandbox unusable: it was closed", 0.0)
        if self._broken:
            return ExecResult(125, f"sandbox unusable: {self._broken}", 0.0)
        command = ["/usr/bin/python3", "-I", "-S", "-c", SUPERVISOR, f"{timeout_s:.3f}",
                   str(cap_bytes), *argv]
        try:
            exec_id = self._api.exec_create(
                self.container_id, command, stdout=True, stderr=True, stdin=False, tty=False,
                environment={**self._env, **env}, workdir=self.workdir, user=self._user,
            )["Id"]
            stream = self._api.exec_start(exec_id, stream=True)
        except docker.errors.DockerException as exc:
            self._broken = f"the container no longer runs commands ({exc})"
            return ExecResult(125, f"sandbox unusable: {self._broken}", time.monotonic() - start)
        buffer = CappedBuffer(cap_bytes + 4096)  # the supervisor already capped it

        def pump() -> None:
            try:
                for chunk in stream:
                    buffer.write(chunk)
            except Exception:  # the stream breaks when the container is killed
                pass

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        reader.join(max(timeout_s, 0.0) + HOST_GRACE_S)
        if reader.is_alive():
            self._broken = f"a command outlived its {timeout_s:g} s timeout; container killed"
            self._kill()
            stream.close()
            reader.join(5.0)
            return ExecResult(None, buffer.text(), time.monotonic() - start, timed_out=True)
        try:
            code = self._exit_code(exec_id)
        except docker.errors.DockerException as exc:  # closed or killed meanwhile
            self._broken = self._broken or f"the container went away ({exc})"
            code = 125
        if code is None:  # the engine never reported an exit status
            code = 125
        duration = time.monotonic() - start
        if code == 124 and duration >= timeout_s:
            return ExecResult(None, buffer.text(), duration, timed_out=True)
        return ExecResult(code, buffer.text(), duration)

    def _exit_code(self, exec_id: str) -> int | None:
        for _ in range(100):
            info = self._api.exec_inspect(exec_id)
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.02)
        return None

    def _kill(self) -> None:
        import docker.errors

        try:
            self._api.kill(self.container_id)
        except docker.errors.DockerException:
            pass

    def close(self) -> None:
        import docker.errors

        if not self._closed:
            self._closed = True
            try:
                self._api.remove_container(self.container_id, force=True)
            except docker.errors.DockerException:
                pass  # already gone (killed, removed by cleanup_leftovers, engine restarted)
        self._lease.release()
