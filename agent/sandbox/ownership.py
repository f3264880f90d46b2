"""Hand a workspace tree to the sandbox user and back, so files keep one owner at a time.

The sandbox writes the workspace as an unprivileged uid; afterwards the caller (often root)
runs git in it, and git refuses repositories owned by someone else. So `open()` chowns the
tree to the sandbox uid and `close()` gives it back to whoever owned the workspace before.
"""

from __future__ import annotations

import os
from pathlib import Path

from ooda.agent.support import fstree


def chown_tree(root: Path, uid: int, gid: int) -> None:
    """lchown `root` and everything below it (symlinks themselves, never their targets;
    iteratively, through descriptors: see ooda.agent.support.fstree)."""
    if os.geteuid() != 0:
        return
    fstree.chown_tree(root, uid, gid)


class Lease:
    """The workspace lent to a sandbox uid; `release()` restores the original owner."""

    def __init__(self, workspace: Path, uid: int, gid: int) -> None:
        info = workspace.stat()
        self.workspace = workspace
        self.owner = (info.st_uid, info.st_gid)
        self.active = (info.st_uid, info.st_gid) != (uid, gid)
        if self.active:
            chown_tree(workspace, uid, gid)

    def release(self) -> None:
        if self.active and self.workspace.exists():
            chown_tree(self.workspace, *self.owner)
        self.active = False
