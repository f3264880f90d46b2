"""Run a shell script as root in a build container on Docker's default bridge (the only
place an environment build reaches the network), and commit the result as an image.

The host's registry settings (hostconfig.py) come in as environment variables and read-only
mounts; a pip cache on the host is shared by every build. The container is always removed.
"""

from __future__ import annotations

import contextlib
import io
import shlex
import tarfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.environments.hostconfig import HostConfig

PIP_CACHE_IN_CONTAINER = "/run/ooda-build/pip-cache"
BUILD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
RUNTIME_CHANGES = (
    f"ENV PATH={image.SANDBOX_PATH}",
    "ENV LANG=C.UTF-8",
    f"USER {image.SANDBOX_UID}:{image.SANDBOX_UID}",
    "WORKDIR /work",
    'CMD ["sleep", "infinity"]',
)
"""What a committed image runs as: the sandbox user, in /work, with the sandbox's PATH."""


@dataclass
class Outcome:
    """How a build script ended: its exit code and its whole output."""

    exit_code: int
    log: str


@dataclass(frozen=True)
class Commit:
    """What a build that succeeded becomes: the image `tag`, with `labels` (which the build
    container carries too)."""

    tag: str
    labels: Mapping[str, str] = field(default_factory=dict)


def run_script(
    client: Any,
    base: str,
    script: str,
    host: HostConfig,
    *,
    env: Mapping[str, str] | None = None,
    upload: tuple[str, bytes] | None = None,
    commit: Commit | None = None,
    timeout_s: float = 3600.0,
) -> Outcome:
    """Run `script` (sh -e) in a container from `base` with the network; `upload`: (directory,
    tar bytes) extracted into the container first; `commit`: the image the finished
    container becomes when the script succeeded."""
    import docker.errors

    cache = image.ooda_home() / "envs" / "pip-cache"
    cache.mkdir(parents=True, exist_ok=True)
    binds = [f"{path}:{target}:ro" for path, target in host.binds.items()]
    binds.append(f"{cache}:{PIP_CACHE_IN_CONTAINER}:rw")
    environment = {**host.env, "PIP_CACHE_DIR": PIP_CACHE_IN_CONTAINER,
                   "DEBIAN_FRONTEND": "noninteractive", "PIP_NO_INPUT": "1",
                   "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_ROOT_USER_ACTION": "ignore",
                   "HOME": "/root", "LANG": "C.UTF-8", "PATH": BUILD_PATH, **(env or {})}
    # exported by the script, not given as the container's Env: `docker commit` would keep
    # the build's settings (CA path, indexes) in the image
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in environment.items())
    api = client.api
    labels = dict(commit.labels) if commit is not None else {}
    try:
        created = api.create_container(
            base, command=["/bin/sh", "-ec", exports + script], user="0:0",
            working_dir="/work",
            labels={"ooda": "1", "ooda.build": "1", **docker_image.owner_labels(),
                    **labels},
            host_config=api.create_host_config(binds=binds, network_mode="bridge"),
        )
    except (docker.errors.DockerException, OSError) as exc:
        raise InfraError(f"could not create a build container from {base}: {exc}") from exc
    cid = created["Id"]
    try:
        if upload is not None:
            api.put_archive(cid, upload[0], upload[1])
        api.start(cid)
        try:
            code = int(api.wait(cid, timeout=timeout_s).get("StatusCode", 1))
        except Exception:  # requests' ReadTimeout: the build ran past its limit
            with contextlib.suppress(docker.errors.DockerException):
                api.kill(cid)
            code = 124
        log = api.logs(cid, stdout=True, stderr=True).decode("utf-8", "replace")
        if code == 124:
            log += f"\nooda: the build ran past its {timeout_s:g} s limit\n"
        if code == 0 and commit is not None:
            repo, _, tag = commit.tag.partition(":")
            api.commit(cid, repository=repo, tag=tag,
                       changes=[*RUNTIME_CHANGES, *UNOWNED,
                                *(f"LABEL {k}={v}" for k, v in labels.items())])
        return Outcome(code, log)
    except (docker.errors.DockerException, OSError) as exc:
        raise InfraError(f"the build container from {base} failed: {exc}") from exc
    finally:
        with contextlib.suppress(docker.errors.DockerException, OSError):
            api.remove_container(cid, force=True)


UNOWNED = tuple(f'LABEL {key}=""' for key in (*docker_image.owner_labels(), "ooda.build"))
"""The image does not keep the build container's owner: a container made from it without
owner labels of its own is nobody's to clean up (an empty host never matches this one)."""


def tar_of(directory: Path) -> bytes:
    """`directory` as an uncompressed tar (numeric owners, no .git), for put_archive."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for path in sorted(directory.rglob("*")):
            rel = path.relative_to(directory)
            if rel.parts[0] == ".git":
                continue
            info = archive.gettarinfo(str(path), arcname=rel.as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            if info.isreg():
                with path.open("rb") as handle:
                    archive.addfile(info, handle)
            else:
                archive.addfile(info)
    return buffer.getvalue()
