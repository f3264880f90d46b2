"""Start a Docker sandbox container: its configuration (in one place), its one-shot control
socket, and the engine it is started, killed and removed through: `RawEngine`, the engine's
HTTP API on its unix socket with the standard library only (the docker SDK with requests and
urllib3 takes a fifth of a second to import, on the critical path of every run), or
`SdkEngine`, the docker SDK (an engine on TCP). Both post the very same configuration.

The raw path needs nothing of the command line but the task path, so `ooda run` can start its
first container while Python is still parsing options (agent/prestart.py);
agent/sandbox/docker_sandbox.py then adopts it.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import tempfile
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agent.errors import InfraError
from agent.sandbox import image, zygote

MEMORY_LIMIT_BYTES = 2 << 30
CPUS = float(os.environ.get("OODA_SANDBOX_CPUS", "1"))
PIDS_LIMIT = 256
TMP_SIZE = "256m"
FILE_SIZE_LIMIT = 1 << 30
CONTROL_DIR = "/run/ooda"
SOCKET_NAME = "control.sock"
WORKDIR = "/work"
BASE_ENV = {
    "PATH": image.SANDBOX_PATH,
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
}
ZYGOTE_SOURCE = f"# {zygote.MARKER}: agent/sandbox/zygote.py\n" + Path(zygote.__file__).read_text()
"""PID 1's program; its first line names it, for `ps` and `docker top` (which cut long lines)."""



@dataclass
class Launched:
    """A started container whose PID 1 is about to connect to `listener`."""

    container_id: str
    tag: str
    listener: socket.socket
    control: Path
    workspace: Path
    env: dict[str, str]
    uid: int
    gid: int

    def release(self) -> None:
        """Stop listening and remove the control directory (after the one connection)."""
        self.listener.close()
        shutil.rmtree(self.control, ignore_errors=True)


def sandbox_user() -> tuple[int, int]:
    """The uid:gid commands run as: the image's unprivileged user when we are root."""
    if os.geteuid() == 0:
        return image.SANDBOX_UID, image.SANDBOX_UID
    return os.getuid(), os.getgid()


def container_config(
    tag: str, workspace: Path, control: Path, env: dict[str, str], uid: int, gid: int
) -> dict[str, Any]:
    """The Docker API's create body: no network, no capabilities, no new privileges, read-only
    root, private /tmp, pids/memory/CPU/file-size limits, an allow-listed environment, removed
    as soon as PID 1 exits (when the host closes the control socket)."""
    return {
        "Image": tag,
        "Cmd": ["/usr/bin/python3", "-c", ZYGOTE_SOURCE, zygote.MARKER,
                f"{CONTROL_DIR}/{SOCKET_NAME}"],
        "User": f"{uid}:{gid}",
        "WorkingDir": WORKDIR,
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": {"ooda": "1", **image.owner_labels()},
        "Hostname": "sandbox",
        "HostConfig": {
            "Binds": [f"{workspace.resolve()}:{WORKDIR}:rw", f"{control}:{CONTROL_DIR}:ro"],
            "AutoRemove": True,
            "NetworkMode": "none",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "ReadonlyRootfs": True,
            "Tmpfs": {"/tmp": f"size={TMP_SIZE},mode=1777,exec"},
            "PidsLimit": PIDS_LIMIT,
            "Memory": MEMORY_LIMIT_BYTES,
            "MemorySwap": MEMORY_LIMIT_BYTES,
            "NanoCpus": int(CPUS * 1e9),
            "Ulimits": [{"Name": "fsize", "Soft": FILE_SIZE_LIMIT, "Hard": FILE_SIZE_LIMIT}],
        },
    }


def launch(engine: Engine, tag: str, workspace: Path, *, with_requirements: bool) -> Launched:
    """Listen once on a fresh control socket, then start the container (InfraError if not)."""
    env = dict(BASE_ENV)
    if with_requirements:
        env["PYTHONPATH"] = image.REQS_MOUNT
    uid, gid = sandbox_user()
    control = Path(tempfile.mkdtemp(prefix="ooda-ctl-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    launched = Launched("", tag, listener, control, workspace, env, uid, gid)
    try:
        control.chmod(0o711)
        path = control / SOCKET_NAME
        listener.bind(str(path))
        listener.listen(1)
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
        path.chmod(0o600)
        config = container_config(tag, workspace, control, env, uid, gid)
        launched.container_id = engine.start(config)
    except BaseException:
        launched.release()
        raise
    return launched


# --------------------------------------------------------------------------- the engine


class Engine(Protocol):
    """What a sandbox needs of the Docker engine: start, kill and remove containers."""

    def start(self, config: dict[str, Any]) -> str:
        """Create and start a container from `config`; its id (InfraError when it fails)."""
        ...

    def kill(self, container_id: str) -> None: ...

    def remove(self, container_id: str) -> None:
        """Force-remove; a container already gone is fine."""
        ...


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def engine_socket() -> str | None:
    """The Docker engine's unix socket per DOCKER_HOST (None: not a local unix socket)."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    return host[len("unix://"):] if host.startswith("unix://") else None


class RawEngine:
    """The engine's HTTP API on its unix socket, with the standard library only: the docker SDK
    (with requests and urllib3) takes a fifth of a second to import, on the critical path of
    every `ooda run`. One connection per call, so it may be shared by threads."""

    def __init__(self, path: str, timeout_s: float = 60.0) -> None:
        self.path = path
        self.timeout_s = timeout_s

    @classmethod
    def from_env(cls) -> RawEngine | None:
        path = engine_socket()
        return cls(path) if path is not None else None

    def call(self, method: str, url: str, body: object = None) -> tuple[int, bytes]:
        """(status, body) of one request; InfraError when the engine cannot be reached."""
        conn = _UnixConnection(self.path, self.timeout_s)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            headers = {"Content-Type": "application/json"} if payload is not None else {}
            conn.request(method, url, body=payload, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        except (OSError, http.client.HTTPException) as exc:
            raise InfraError(f"Docker engine not answering on {self.path}: {exc}") from exc
        finally:
            conn.close()

    def ping(self) -> None:
        status, _ = self.call("GET", "/_ping")
        if status != 200:
            raise InfraError(f"Docker engine on {self.path} answers HTTP {status} to a ping")

    def image_exists(self, tag: str) -> bool:
        return self.call("GET", f"/images/{tag}/json")[0] == 200

    def start(self, config: dict[str, Any]) -> str:
        status, data = self.call("POST", "/containers/create", config)
        if status != 201:
            raise InfraError(f"docker create: HTTP {status}: {data[:300]!r}")
        container_id = str(json.loads(data)["Id"])
        status, data = self.call("POST", f"/containers/{container_id}/start")
        if status not in (204, 304):
            self.remove(container_id)
            raise InfraError(f"docker start: HTTP {status}: {data[:300]!r}")
        return container_id

    def kill(self, container_id: str) -> None:
        self.call("POST", f"/containers/{container_id}/kill")

    def remove(self, container_id: str) -> None:
        self.call("DELETE", f"/containers/{container_id}?force=1")

    def containers(self, labels: list[str]) -> list[dict[str, Any]]:
        """All containers (running or not) carrying every label given (`key` or `key=value`)."""
        query = urllib.parse.quote(json.dumps({"label": labels}))
        status, data = self.call("GET", f"/containers/json?all=1&filters={query}")
        if status != 200:
            raise InfraError(f"docker ps: HTTP {status}: {data[:300]!r}")
        found = json.loads(data)
        return found if isinstance(found, list) else []

    def close(self) -> None:
        pass


class SdkEngine:
    """The same operations through a docker SDK APIClient (engines on TCP, tests)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    def start(self, config: dict[str, Any]) -> str:
        import docker.errors

        try:
            container_id = str(self.api.create_container_from_config(config)["Id"])
            try:
                self.api.start(container_id)
            except BaseException:
                self.remove(container_id)
                raise
        except (docker.errors.DockerException, OSError) as exc:  # OSError: engine gone
            raise InfraError(f"could not start a sandbox container: {exc}") from exc
        return container_id

    def kill(self, container_id: str) -> None:
        import docker.errors

        try:
            self.api.kill(container_id)
        except (docker.errors.DockerException, OSError):
            pass

    def remove(self, container_id: str) -> None:
        import docker.errors

        try:
            self.api.remove_container(container_id, force=True)
        except (docker.errors.DockerException, OSError):
            pass  # already gone (killed, removed by cleanup_leftovers, engine restarted)
