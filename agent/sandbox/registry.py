"""Which sandbox backend a run gets: the name → backend registry and the one `auto` rule.

`get_backend(name)` opens the named backend ("docker", "bwrap", "local"); for None/"auto" Docker
when an engine answers, else bubblewrap when it works here, else an InfraError saying what to
install (`local`, no isolation, only when named). `open_backend` does the same for a new
invocation and, when asked, removes the containers dead invocations left behind;
`build_image` builds the rootfs and the Docker image ahead of need (`ooda sandbox build`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable

from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import SandboxBackend
from ooda.agent.sandbox import image, overlay
from ooda.agent.sandbox.bwrap import BwrapBackend, bwrap_problem
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.docker.backend import DockerBackend
from ooda.agent.sandbox.docker.launch import connect, docker_problem
from ooda.agent.sandbox.local import LocalBackend

BACKENDS: dict[str, Callable[[], SandboxBackend]] = {
    "docker": DockerBackend,
    "bwrap": BwrapBackend,
    "local": LocalBackend,
}
"""Each backend by the name `--sandbox` takes; calling one opens it (building its image when
missing, with progress on stderr) or raises InfraError saying why it cannot work here."""


def get_backend(name: str | None = None) -> SandboxBackend:
    """The named backend, or for None/"auto" the best one here (UsageError: unknown name)."""
    if name in (None, "auto"):
        docker_why = docker_problem()
        if docker_why is None:
            return BACKENDS["docker"]()
        bwrap_why = bwrap_problem()
        if bwrap_why is None:
            _say_fallback()
            return BACKENDS["bwrap"]()
        raise InfraError(
            "no sandbox: install and start Docker (apt-get install docker.io; dockerd &) or "
            "install bubblewrap (apt-get install bubblewrap), e.g. with scripts/setup.sh; or pass "
            f"--sandbox local to run unisolated. Docker: {docker_why} | bwrap: {bwrap_why}"
        )
    if name not in BACKENDS:
        raise UsageError(f"unknown sandbox {name!r}: choose one of {', '.join(BACKENDS)} or auto")
    return BACKENDS[name]()


_said_fallback = False


def _say_fallback() -> None:
    """The one line a run prints when `auto` picks bubblewrap because Docker does not answer
    (once a process): which engine address was tried, and how to choose quietly."""
    global _said_fallback
    if _said_fallback:
        return
    _said_fallback = True
    host = os.environ.get("DOCKER_HOST")
    where = f"at DOCKER_HOST={host}" if host else "at the default socket"
    print(f"ooda: note: no Docker engine answers {where}: sandboxing with bubblewrap instead "
          "(`ooda doctor` says why; --sandbox bwrap chooses it without this note)",
          file=sys.stderr, flush=True)


def open_backend(name: str | None, *, clean_leftovers: bool = True) -> SandboxBackend:
    """The sandbox backend for a new invocation (`ooda run`, `eval`, `ci`). With
    `clean_leftovers` (and a backend that may be Docker), meanwhile, in the background (it does
    not block the backend), the containers that killed or crashed earlier invocations left
    behind are removed (best effort: their owner process is gone). The daemon does that between
    commands instead, so its workers pass False."""
    if clean_leftovers and name in (None, "auto", "docker"):

        def cleanup() -> None:
            with contextlib.suppress(Exception):  # no engine, or it broke: get_backend says
                cleanup_leftovers()

        threading.Thread(target=cleanup, name="ooda-cleanup", daemon=True).start()
    return get_backend(name)


def build_image(*, force: bool = False, log: Callable[[str], None] = print) -> str:
    """Build the rootfs (for bwrap) and, when a Docker engine answers, the Docker image.

    Cached: only what is missing is built, unless `force`. Returns the image tag.
    """
    root = image.build_rootfs(force=force, log=log)
    log(f"rootfs: {root}")
    if docker_problem() is not None:
        log("no Docker engine answers: built the rootfs only (enough for --sandbox bwrap)")
        return image.image_tag()
    client = connect()
    try:
        tag = docker_image.ensure_docker_image(client, force=force, log=log)
    finally:
        client.close()
    log(f"image: {tag}")
    return tag


def cleanup_leftovers() -> int:
    """Remove ooda-labelled containers whose owner process is gone, and unmount the shared
    workspaces such a process left mounted (agent/sandbox/overlay.py); returns how many
    containers."""
    overlay.unmount_leftovers()
    try:
        client = connect(timeout_s=30)
    except InfraError:
        return 0
    removed = 0
    try:
        owned = {"label": ["ooda=1", "ooda.owner_pid"]}
        for container in client.api.containers(all=True, filters=owned):
            if docker_image.owner_alive(container.get("Labels") or {}):
                continue
            try:
                client.api.remove_container(container["Id"], force=True)
                removed += 1
            except Exception:  # raced with another cleanup or the engine: not ours to fail
                continue
    finally:
        client.close()
    return removed
