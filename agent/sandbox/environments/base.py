"""One base image per Debian release: debootstrap's root filesystem (minbase + python3; ooda's
own image adds the rest of the standard library to its own tree, and a detected environment
asks for those packages as its apt layer: tasks/detect_environment.py), imported into Docker,
then given pip, CA certificates and the sandbox user in a build container.

Both steps are cached (the directory by its marker file, the image by its tag) and locked, so
concurrent builds debootstrap a release once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image
from ooda.agent.sandbox.docker import image as docker_image
from ooda.agent.sandbox.environments import container, hostconfig
from ooda.agent.sandbox.environments.releases import Release
from ooda.agent.sandbox.image import locked

BASE_REPO = "ooda-env-base"
PREP_VERSION = "2"
PREP_SCRIPT = """
apt-get update -q
apt-get install -q -y --no-install-recommends python3-pip ca-certificates
rm -f /usr/lib/python3*/EXTERNALLY-MANAGED
python3 -m pip install -q --upgrade --ignore-installed pip
grep -q '^ooda:' /etc/passwd || {
  echo 'ooda:x:%(uid)d:%(uid)d:ooda sandbox:/tmp:/usr/sbin/nologin' >> /etc/passwd
  echo 'ooda:x:%(uid)d:' >> /etc/group
}
ln -sf python3 /usr/bin/python
mkdir -p /work /opt/ooda-env /opt/ooda-tools
apt-get clean
rm -rf /var/lib/apt/lists/* /root/.cache /usr/share/doc/* /usr/share/man/*
"""
"""Turns the debootstrapped tree into the base every environment of the release builds on
(pip upgraded so that editable installs of pyproject projects work on old releases)."""


def rootfs_dir(release: Release) -> Path:
    """Where debootstrap's tree for `release` is cached."""
    return image.ooda_home() / f"base-{release.name}-{image._debian_arch()}"


def debootstrap(release: Release, log: image.Log = image.stderr_log) -> Path:
    """The release's minbase + python3 tree, debootstrapped when missing (root needed)."""
    base = rootfs_dir(release)
    with locked(f"base-{release.name}"):
        if (base / image.MARKER).is_file():
            return base
        image._require_root(f"debootstrapping {release.name}")
        if shutil.which("debootstrap") is None:
            raise InfraError("debootstrap is missing: apt-get install debootstrap")
        tmp = base.with_name(base.name + f".tmp-{os.getpid()}")
        image._remove_tree(tmp)
        mirror = release.mirror or image._mirror()
        log(f"debootstrap {release.name} (minbase + python3) from {mirror}")
        started = time.monotonic()
        old_umask = os.umask(0o022)
        try:
            image._run(["debootstrap", "--variant=minbase", "--include=python3",
                        f"--arch={image._debian_arch()}", release.name, str(tmp), mirror],
                       f"debootstrap {release.name}")
        finally:
            os.umask(old_umask)
        for junk in image.TRIM:
            for path in tmp.glob(junk):
                image._remove_tree(path)
        (tmp / image.MARKER).write_text(f"{release.name}\n")
        image._remove_tree(base)
        tmp.rename(base)
        log(f"debootstrap {release.name} done in {time.monotonic() - started:.0f} s")
        return base


def base_tag(release: Release) -> str:
    """`ooda-env-base:<release>-<hash of the prep recipe>`."""
    digest = hashlib.sha256(
        f"{PREP_VERSION}\n{PREP_SCRIPT}\n{image._debian_arch()}".encode()
    ).hexdigest()[:8]
    return f"{BASE_REPO}:{release.name}-{digest}"


def _import(client: Any, root: Path, tag: str) -> None:
    tar = subprocess.Popen(["tar", "--numeric-owner", "-C", str(root), "-cf", "-", "."],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        repo, _, version = tag.partition(":")
        client.api.import_image(src=tar.stdout, repository=repo, tag=version,
                                changes=["LABEL ooda=1"])
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait()
    if not docker_image.image_exists(client, tag):
        raise InfraError(f"docker import of {root} did not produce {tag}")


def ensure_base_image(client: Any, release: Release, log: image.Log = image.stderr_log) -> str:
    """The release's base image, built (debootstrap, import, prep) when missing."""
    tag = base_tag(release)
    if docker_image.image_exists(client, tag):
        return tag
    root = debootstrap(release, log)
    with locked(f"base-image-{release.name}"):
        if docker_image.image_exists(client, tag):
            return tag
        raw = f"{BASE_REPO}:{release.name}-debootstrap"
        if not docker_image.image_exists(client, raw):
            log(f"importing {root} as {raw}")
            _import(client, root, raw)
        log(f"preparing {tag} (pip, CA certificates, sandbox user)")
        script = PREP_SCRIPT % {"uid": image.SANDBOX_UID}
        outcome = container.run_script(client, raw, script, hostconfig.host_config(),
                                       commit=container.Commit(tag, {"ooda.env.base": release.name}))
        if outcome.exit_code != 0:
            tail = "\n".join(outcome.log.strip().splitlines()[-15:])
            raise InfraError(f"preparing the {release.name} base image failed:\n{tail}")
        return tag
