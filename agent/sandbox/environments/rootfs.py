"""The root filesystem of an environment image as a directory, for the bwrap backend.

Environments are built as Docker images (builder.py); bwrap binds a directory read-only as
`/`, so the image's filesystem is exported once (`docker export` of a created, never started
container, unpacked by tar with numeric owners) to envs/<hash>/rootfs and reused.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.sandbox import image
from ooda.agent.sandbox.environments.builder import env_dir
from ooda.agent.sandbox.image import locked


def export_rootfs(client: Any, tag: str, digest: str) -> Path:
    """envs/<digest>/rootfs holding the filesystem of image `tag`, exported when missing."""
    final = env_dir(digest) / "rootfs"
    if (final / image.MARKER).is_file():
        return final
    with locked(f"rootfs-{digest}"):
        if (final / image.MARKER).is_file():
            return final
        image._require_root("exporting an environment's root filesystem")
        tmp = final.with_name(f"rootfs.tmp-{os.getpid()}")
        image._remove_tree(tmp)
        tmp.mkdir(parents=True)
        created = client.api.create_container(tag, command=["true"], labels={"ooda": "1"})
        try:
            stream = client.api.export(created["Id"])
            tar = subprocess.Popen(
                ["tar", "--numeric-owner", "--same-permissions", "-C", str(tmp), "-xf", "-"],
                stdin=subprocess.PIPE, stderr=subprocess.PIPE,
            )
            assert tar.stdin is not None and tar.stderr is not None
            try:
                for chunk in stream:
                    tar.stdin.write(chunk)
            finally:
                tar.stdin.close()
            err = tar.stderr.read().decode(errors="replace")
            if tar.wait() != 0:
                raise InfraError(f"unpacking {tag} into {tmp} failed: {err.strip()[-300:]}")
        finally:
            client.api.remove_container(created["Id"], force=True)
        (tmp / image.MARKER).write_text(tag + "\n")
        image._remove_tree(final)
        tmp.rename(final)
        return final
