"""Start a Docker sandbox container: its configuration (in one place), its one-shot control
socket, and the engine it is started, killed and removed through (`SdkEngine`: the `docker`
SDK's low-level APIClient, from `connect()`, the one place a docker SDK client is made).

Starting a container needs nothing of the command line but the task path, so `ooda run` can
start its first container while Python is still parsing options (agent/startup/prestart.py);
agent/sandbox/docker/backend.py then adopts it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import fidelity, image, warm
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.docker import zygote
from ooda.agent.sandbox.limits import configured
from ooda.agent.support import fstree
from ooda.agent.support.env_numbers import positive_from_env

FILE_SIZE_LIMIT = 1 << 30
CONTROL_DIR = "/run/ooda"
SOCKET_NAME = "control.sock"
WORKDIR = "/work"
ZYGOTE_SOURCE = f"# {zygote.MARKER}: agent/sandbox/docker/zygote.py\n" + Path(zygote.__file__).read_text()
"""PID 1's program; its first line names it, for `ps` and `docker top` (which cut long lines)."""


_api_versions: dict[str, str] = {}
"""DOCKER_HOST -> the API version its engine named in this process (or in the daemon that
forked it): later clients skip asking for it again (they still ping)."""


def connect(timeout_s: float = 300.0) -> Any:
    """A docker SDK client whose engine answers, or InfraError saying what to do."""
    host = os.environ.get("DOCKER_HOST", "")
    try:
        import docker  # the SDK: ~120 ms, only when a Docker sandbox is wanted

        def answering(version: str | None) -> Any:
            client = docker.from_env(timeout=int(timeout_s), max_pool_size=64, version=version)
            client.ping()
            return client

        known = _api_versions.pop(host, None)
        try:
            client = answering(known)
        except Exception:
            if known is None:
                raise
            client = answering(None)  # the engine refused the remembered version: ask it
        _api_versions[host] = client.api.api_version
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


@dataclass
class Launched:
    """A started container whose PID 1 is about to connect to `listener`, or has connected
    already (`connected`: a container an earlier command used, reset and handed back to the
    daemon, agent/startup/daemon.py; its listener and control directory are long gone)."""

    container_id: str
    tag: str
    listener: socket.socket | None
    control: Path | None
    workspace: Path
    env: dict[str, str]
    uid: int
    gid: int
    connected: socket.socket | None = None

    def release(self) -> None:
        """Stop listening and remove the control directory (after the one connection)."""
        if self.listener is not None:
            self.listener.close()
        if self.control is not None:
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
    root, private /tmp and HOME, a bounded /dev/shm, pids/memory/CPU/file-size limits (see
    agent/sandbox/limits.py), an allow-listed environment (agent/sandbox/fidelity.py), removed
    as soon as PID 1 exits (when the host closes the control socket)."""
    limits = configured()
    return {
        "Image": tag,
        "Cmd": ["/usr/bin/python3", "-c", ZYGOTE_SOURCE, zygote.MARKER,
                f"{CONTROL_DIR}/{SOCKET_NAME}"],
        "User": f"{uid}:{gid}",
        "WorkingDir": WORKDIR,
        "Env": [f"{k}={v}" for k, v in env.items()],
        "Labels": {"ooda": "1", **docker_image.owner_labels()},
        "Hostname": "sandbox",
        "HostConfig": {
            "Binds": [f"{workspace.resolve()}:{WORKDIR}:rw", f"{control}:{CONTROL_DIR}:ro",
                      f"{fidelity.site_dir()}:{fidelity.SITE_MOUNT}:ro"],
            "AutoRemove": True,
            "NetworkMode": "none",
            "CapDrop": ["ALL"],
            "SecurityOpt": ["no-new-privileges"],
            "ReadonlyRootfs": True,
            "Tmpfs": {"/tmp": f"size={limits.tmp},mode=1777,exec",
                      fidelity.HOME: f"size={limits.tmp},mode=0755,uid={uid},gid={gid},exec"},
            "PidsLimit": limits.pids,
            "ShmSize": limits.shm,
            "Memory": limits.memory,
            "MemorySwap": limits.memory,
            "NanoCpus": int(cpus() * 1e9),
            "Ulimits": [{"Name": "fsize", "Soft": FILE_SIZE_LIMIT, "Hard": FILE_SIZE_LIMIT}],
        },
    }


def launch(
    engine: Engine, tag: str, workspace: Path, *, with_requirements: bool,
    extra_env: dict[str, str] | None = None,
) -> Launched:
    """Listen once on a fresh control socket, then start the container (InfraError if not);
    `extra_env`: more of the container's own environment (a task environment's settings)."""
    launched, config = prepare(tag, workspace, with_requirements=with_requirements,
                               extra_env=extra_env)
    try:
        launched.container_id = engine.start(config)
    except BaseException:
        launched.release()
        raise
    return launched


def prepare(
    tag: str, workspace: Path, *, with_requirements: bool,
    extra_env: dict[str, str] | None = None,
) -> tuple[Launched, dict[str, Any]]:
    """A fresh control socket listening once, and the create body of the container that will
    connect to it (not started: its id is ""). Separate from the start so that the daemon can
    start it in another process while it serves commands (agent/startup/daemon.py)."""
    env = fidelity.base_env(extra_env, requirements=with_requirements)
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
        write_warm(control / zygote.WARM_NAME, warm.held())
        config = container_config(tag, workspace, control, env, uid, gid)
    except BaseException:
        launched.release()
        raise
    return launched, config


def write_warm(path: Path, packages: dict[str, dict[str, str]]) -> None:
    """Write the packages PID 1 holds warm (agent/sandbox/warm.py) to `path`, in the control
    directory the container sees read-only; PID 1 reads them before it connects."""
    if packages:
        path.write_text(json.dumps(packages), encoding="utf-8")
        path.chmod(0o644)


def launch_on_last_image(engine: Engine, prefix: str) -> tuple[Path, Launched] | None:
    """Start a container ahead of need (agent/startup/prestart.py): on the image the Docker
    backend used last, for a task without requirements, its slot in a fresh directory named
    `prefix`… that the caller then owns. None when no image was built yet."""
    prepared = prepare_on_last_image(prefix)
    if prepared is None:
        return None
    work, launched, config = prepared
    try:
        launched.container_id = engine.start(config)
    except BaseException:
        launched.release()
        fstree.remove_tree(work)
        raise
    return work, launched


def prepare_on_last_image(prefix: str) -> tuple[Path, Launched, dict[str, Any]] | None:
    """launch_on_last_image() up to the start: its directory, the container listened for and
    its create body (agent/startup/daemon.py starts it in another process)."""
    tag = docker_image.last_tag()  # checked against the backend's image before adoption
    if tag is None:
        return None
    work = Path(tempfile.mkdtemp(prefix=prefix))
    slot = Path(tempfile.mkdtemp(prefix="slot-", dir=work))
    try:
        return (work, *prepare(tag, slot, with_requirements=False))
    except BaseException:
        fstree.remove_tree(work)
        raise


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


class SdkEngine:
    """Engine operations through a docker SDK APIClient (may be shared by threads)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @classmethod
    def connect(cls, timeout_s: float = 60.0) -> SdkEngine:
        """An engine for the Docker host of the environment (InfraError when none answers)."""
        return cls(connect(timeout_s=timeout_s).api)

    def image_exists(self, tag: str) -> bool:
        import docker.errors

        try:
            self.api.inspect_image(tag)
        except docker.errors.ImageNotFound:
            return False
        except (docker.errors.DockerException, OSError) as exc:
            raise InfraError(f"Docker engine not answering: {exc}") from exc
        return True

    def containers(self, labels: list[str]) -> list[dict[str, Any]]:
        """All containers (running or not) carrying every label given (`key` or `key=value`)."""
        import docker.errors

        try:
            found = self.api.containers(all=True, filters={"label": labels})
        except (docker.errors.DockerException, OSError) as exc:
            raise InfraError(f"Docker engine not answering: {exc}") from exc
        return list(found)

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

    def kill(self, container_id: str, wait_s: float = 30.0) -> None:
        """SIGKILL PID 1 and wait (up to `wait_s`) until the container stopped: its pid
        namespace is then empty (a fork bomb's thousand processes take a moment to die)."""
        try:
            self.api.kill(container_id)
            self.api.wait(container_id, timeout=wait_s)
        except Exception:  # noqa: BLE001 DockerException, OSError, requests' ReadTimeout:
            pass  # gone already (auto-removed), or the engine did not answer in time

    def remove(self, container_id: str) -> None:
        import docker.errors

        try:
            self.api.remove_container(container_id, force=True)
        except (docker.errors.DockerException, OSError):
            pass  # already gone (killed, removed by cleanup_leftovers, engine restarted)


def cpus() -> float:
    """The CPUs a sandbox container may use: OODA_SANDBOX_CPUS, else 1 (a UsageError when not
    a positive number)."""
    return positive_from_env("OODA_SANDBOX_CPUS", 1.0, float, "a positive number of CPUs")
