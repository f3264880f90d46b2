"""Start a Docker sandbox container: its configuration (in one place), its one-shot control
socket, and the start itself, through the docker SDK or the engine's HTTP API directly.

The direct path needs neither the SDK (a tenth of a second to import) nor anything of the
command line but the task path, so `ooda run` can start its first container while Python is
still parsing options (agent/prestart.py); agent/sandbox/docker_sandbox.py then adopts it.
Both paths post the very same container configuration (`container_config`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

Start = Callable[[dict[str, Any]], str]
"""Creates and starts a container from a configuration; returns its id."""


@dataclass
class Launched:
    """A started container whose PID 1 is about to connect to `listener`."""

    container_id: str
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


def launch(start: Start, tag: str, workspace: Path, *, with_requirements: bool) -> Launched:
    """Listen once on a fresh control socket, then start the container (InfraError if not)."""
    env = dict(BASE_ENV)
    if with_requirements:
        env["PYTHONPATH"] = image.REQS_MOUNT
    uid, gid = sandbox_user()
    control = Path(tempfile.mkdtemp(prefix="ooda-ctl-"))
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    launched = Launched("", listener, control, workspace, env, uid, gid)
    try:
        control.chmod(0o711)
        path = control / SOCKET_NAME
        listener.bind(str(path))
        listener.listen(1)
        if os.geteuid() == 0:
            os.chown(path, uid, gid)
        path.chmod(0o600)
        launched.container_id = start(container_config(tag, workspace, control, env, uid, gid))
    except BaseException:
        launched.release()
        raise
    return launched


# --------------------------------------------------------------------------- the raw API


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


def start_raw(config: dict[str, Any], timeout_s: float = 30.0) -> str:
    """Create and start a container through the engine's HTTP API (no docker SDK)."""
    path = engine_socket()
    if path is None:
        raise InfraError("DOCKER_HOST is not a local unix socket")
    conn = _UnixConnection(path, timeout_s)
    try:
        body = json.dumps(config).encode()
        conn.request("POST", "/containers/create", body=body,
                     headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 201:
            raise InfraError(f"docker create: HTTP {response.status}: {data[:200]!r}")
        container_id = str(json.loads(data)["Id"])
        conn.request("POST", f"/containers/{container_id}/start")
        response = conn.getresponse()
        data = response.read()
        if response.status not in (204, 304):
            conn.request("DELETE", f"/containers/{container_id}?force=1")
            conn.getresponse().read()
            raise InfraError(f"docker start: HTTP {response.status}: {data[:200]!r}")
        return container_id
    except (OSError, http.client.HTTPException, ValueError, KeyError) as exc:
        raise InfraError(f"docker engine: {exc}") from exc
    finally:
        conn.close()


def start_with_sdk(api: Any) -> Start:
    """A Start through a docker SDK APIClient."""

    def start(config: dict[str, Any]) -> str:
        container_id = str(api.create_container_from_config(config)["Id"])
        try:
            api.start(container_id)
        except BaseException:
            try:
                api.remove_container(container_id, force=True)
            except Exception:  # the start error is the one to report
                pass
            raise
        return container_id

    return start
