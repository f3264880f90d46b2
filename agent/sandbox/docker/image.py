"""The sandbox image in Docker: `ooda-sandbox:<hash>` imported from the offline root filesystem
(agent/sandbox/image.py builds it), derived images with a repository's requirements baked in at
/opt/ooda-reqs, the tag this installation's backend used last (so a container can be started before the recipe
is computed: agent/startup/prestart.py), and the labels naming the host process that owns a
container (so the registry's cleanup_leftovers can tell a dead invocation's containers).
"""

from __future__ import annotations

import hashlib
import os
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image


def _tag_file() -> Path:
    """Where this installation of ooda notes its image: one file per installation (its
    source folder), so that two installations on one machine (a venv and a checkout; a team's
    worktrees sharing one OODA_HOME), whose images differ, do not start each other's image
    ahead of need, which neither could then adopt."""
    root = Path(__file__).resolve().parents[3]
    return image.ooda_home() / f"docker-image-{hashlib.sha256(bytes(root)).hexdigest()[:12]}"


def remember_tag(tag: str) -> None:
    """Note the image the Docker backend settled on (for last_tag(); best effort)."""
    try:
        path = _tag_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(tag + "\n")
        tmp.replace(path)
    except OSError:
        pass


def last_tag() -> str | None:
    """The image the Docker backend used last on this machine, without computing the recipe
    (agent/startup/prestart.py starts a container with it early; the backend then checks it is the
    current one)."""
    try:
        text = _tag_file().read_text().strip()
    except OSError:
        return None
    return text or None



def _tar_stream(directory: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(directory), "-cf", "-", "."],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )


def image_exists(client: Any, tag: str) -> bool:
    import docker.errors

    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_docker_image(
    client: Any, *, force: bool = False, log: image.Log = image.stderr_log
) -> str:
    """Import the rootfs into Docker as `ooda-sandbox:<hash>` unless it is already there
    (`force`: import again; the rootfs itself is rebuilt only by build_rootfs(force=True))."""
    tag = image.image_tag()
    if not force and image_exists(client, tag):
        return tag
    root = image.build_rootfs(log=log)
    with image.locked("docker-image"):
        if not force and image_exists(client, tag):
            return tag
        log(f"importing {tag} into Docker")
        started = time.monotonic()
        tar = _tar_stream(root)
        changes = [
            "LABEL ooda=1",
            f"LABEL ooda.recipe={image.recipe_hash()}",
            f"ENV PATH={image.SANDBOX_PATH}",
            "ENV LANG=C.UTF-8",
            f"USER {image.SANDBOX_UID}:{image.SANDBOX_UID}",
            "WORKDIR /work",
            'CMD ["sleep", "infinity"]',
        ]
        try:
            repo, _, version = tag.partition(":")
            client.api.import_image(src=tar.stdout, repository=repo, tag=version, changes=changes)
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
        if not image_exists(client, tag):
            raise InfraError(f"docker import of {tag} did not produce the image")
        log(f"image {tag} imported in {time.monotonic() - started:.0f} s")
        return tag


def ensure_requirements_image(
    client: Any, requirements: Path, log: image.Log = image.stderr_log
) -> str:
    """The base image plus the repo's requirements at /opt/ooda-reqs, cached by their sha256."""
    base = ensure_docker_image(client, log=log)
    tag = image.requirements_tag(requirements)
    site = image.requirements_site(requirements, log)
    with image.locked("docker-image"):
        if image_exists(client, tag):
            return tag
        log(f"baking the requirements into {tag}")
        container = client.api.create_container(
            base, command=["true"], labels={"ooda": "1", **owner_labels()}
        )
        try:
            tar = _tar_stream(site)
            try:
                client.api.put_archive(container["Id"], image.REQS_MOUNT, tar.stdout)
            finally:
                if tar.stdout is not None:
                    tar.stdout.close()
                tar.wait()
            repo, _, version = tag.partition(":")
            label = f"LABEL ooda.requirements={image.requirements_sha(requirements)}"
            client.api.commit(container["Id"], repository=repo, tag=version, changes=[label])
        finally:
            client.api.remove_container(container["Id"], force=True)
        return tag


def _process_start(pid: int) -> str:
    """The kernel's start time of `pid` (field 22 of /proc/PID/stat), to tell reused pids apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


def owner_labels() -> dict[str, str]:
    """Labels saying which host process owns a container, for cleanup_leftovers."""
    return {
        "ooda.owner_pid": str(os.getpid()),
        "ooda.owner_start": _process_start(os.getpid()),
        "ooda.owner_host": platform.node(),
        "ooda.created": f"{time.time():.0f}",
    }


def owner_alive(labels: dict[str, str]) -> bool:
    """Whether the process named by a container's owner labels still runs (on this host)."""
    if labels.get("ooda.owner_host", platform.node()) != platform.node():
        return True
    try:
        pid = int(labels.get("ooda.owner_pid", ""))
    except ValueError:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    start = labels.get("ooda.owner_start")
    return not start or _process_start(pid) == start
