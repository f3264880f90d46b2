"""Sandbox backends (docker, bwrap, local) behind one small factory.

`get_backend()` picks Docker when an engine answers, else bubblewrap when it works here, else
fails saying what to install; `local` (no isolation) only when asked for by name. Backends build
the offline image on first use. See docs/ARCHITECTURE.md and agent/contracts/protocols.py (`Sandbox`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import Sandbox, SandboxBackend
from ooda.agent.sandbox import image

__all__ = ["SandboxBackend", "build_image", "cleanup_leftovers", "get_backend"]

BACKENDS = ("docker", "bwrap", "local")


class LocalBackend:
    """No isolation: commands run on the host with the host's Python. Only when named."""

    name = "local"

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox:
        from ooda.agent.sandbox.local import LocalSandbox

        return LocalSandbox(workspace)

    def close(self) -> None:
        pass


def get_backend(name: str | None = None) -> SandboxBackend:
    """The named backend ("docker", "bwrap", "local"), or for None/"auto" the best one here.

    Raises InfraError when the chosen backend cannot work (saying why and what to do), and
    UsageError for an unknown name. Builds the image on first use, with progress on stderr.
    """
    if name in (None, "auto"):
        from ooda.agent.sandbox.bwrap import BwrapBackend, bwrap_problem
        from ooda.agent.sandbox.docker.backend import DockerBackend, docker_problem

        docker_why = docker_problem()
        if docker_why is None:
            return DockerBackend()
        bwrap_why = bwrap_problem()
        if bwrap_why is None:
            return BwrapBackend()
        raise InfraError(
            "no sandbox: install and start Docker (apt-get install docker.io; dockerd &) or "
            "install bubblewrap (apt-get install bubblewrap), e.g. with scripts/setup.sh; or pass "
            f"--sandbox local to run unisolated. Docker: {docker_why} | bwrap: {bwrap_why}"
        )
    if name == "docker":
        from ooda.agent.sandbox.docker.backend import DockerBackend

        return DockerBackend()
    if name == "bwrap":
        from ooda.agent.sandbox.bwrap import BwrapBackend

        return BwrapBackend()
    if name == "local":
        return LocalBackend()
    raise UsageError(f"unknown sandbox {name!r}: choose one of {', '.join(BACKENDS)} or auto")


def build_image(*, force: bool = False, log: Callable[[str], None] = print) -> str:
    """Build the rootfs (for bwrap) and, when a Docker engine answers, the Docker image.

    Cached: only what is missing is built, unless `force`. Returns the image tag.
    """
    from ooda.agent.sandbox.docker.backend import connect, docker_problem

    root = image.build_rootfs(force=force, log=log)
    log(f"rootfs: {root}")
    if docker_problem() is not None:
        log("no Docker engine answers: built the rootfs only (enough for --sandbox bwrap)")
        return image.image_tag()
    client = connect()
    try:
        tag = image.ensure_docker_image(client, force=force, log=log)
    finally:
        client.close()
    log(f"image: {tag}")
    return tag


def cleanup_leftovers() -> int:
    """Remove ooda-labelled containers whose owner process is gone; returns how many."""
    from ooda.agent.sandbox.docker.backend import connect

    try:
        client = connect(timeout_s=30)
    except InfraError:
        return 0
    removed = 0
    try:
        owned = {"label": ["ooda=1", "ooda.owner_pid"]}
        for container in client.api.containers(all=True, filters=owned):
            if image.owner_alive(container.get("Labels") or {}):
                continue
            try:
                client.api.remove_container(container["Id"], force=True)
                removed += 1
            except Exception:  # raced with another cleanup or the engine: not ours to fail
                continue
    finally:
        client.close()
    return removed
