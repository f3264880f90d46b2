"""Resource limits shared by the sandbox backends: memory, processes, /tmp, /dev/shm and the
workspace's disk.

One place for the numbers (each can be changed through an environment variable) and for the
workspace disk bound, which no backend gets from its kernel interface: the workspace is a host
directory bind-mounted into the sandbox, on whatever filesystem the host uses. `DiskWatch`
bounds what one command writes there instead: it polls the host filesystem's used blocks
(cheap, one statvfs) and, once they grew by more than the allowance, walks the workspace as
the host and sums the blocks of every inode changed since the command started (the kernel
sets ctime; a candidate cannot set it back). A command over its allowance is killed and its
result says so: a failure of the candidate, not of the infrastructure.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.support.env_numbers import positive_from_env

MIB = 1 << 20
POLL_S = 0.2
"""How often a running command's disk use is checked (bounds the overshoot: write speed x this)."""
CTIME_SLACK_S = 0.05
"""File timestamps come from a coarse clock (a jiffy or so behind time.time())."""


def _count(name: str, default: int, unit: str = "") -> int:
    return positive_from_env(name, default, int, f"a positive whole number{unit}")


def _mib(name: str, default: int) -> int:
    return _count(name, default, " of MiB") * MIB


@dataclass(frozen=True)
class Limits:
    """What one sandbox may use (bytes)."""

    memory: int
    """Resident memory (and swap) of everything the sandbox runs (OODA_SANDBOX_MEMORY_MB)."""
    shm: int
    """Size of /dev/shm (OODA_SANDBOX_SHM_MB)."""
    pids: int
    """Processes and threads the sandbox may run at once (OODA_SANDBOX_PIDS): a bound on fork
    bombs, high enough for a threaded suite (a thread counts as a process here)."""
    tmp: int
    """Size of the private /tmp (OODA_SANDBOX_TMP_MB), where pytest's tmp_path lives."""
    disk: int
    """Bytes one command may add to the workspace (OODA_SANDBOX_DISK_MB): on top of the repo
    copy already there, so it must hold a build's artefacts, caches and test output."""


def configured() -> Limits:
    """The limits in force: defaults (2 GiB memory, 1024 processes, 1 GiB /tmp, 256 MiB
    /dev/shm, 4 GiB of workspace writes per command), each overridable (sizes in MiB);
    UsageError for a value that is not a positive int."""
    return Limits(
        memory=_mib("OODA_SANDBOX_MEMORY_MB", 2048),
        shm=_mib("OODA_SANDBOX_SHM_MB", 256),
        pids=_count("OODA_SANDBOX_PIDS", 1024),
        tmp=_mib("OODA_SANDBOX_TMP_MB", 1024),
        disk=_mib("OODA_SANDBOX_DISK_MB", 4096),
    )


def disk_note(limit: int) -> str:
    """The line appended to the output of a command killed for its workspace writes."""
    return (f"[ooda: the command was killed: it wrote more than {limit // MIB} MiB to the "
            "workspace (OODA_SANDBOX_DISK_MB)]")


def memory_note(limit: int) -> str:
    """The line appended to the output of a command killed for running out of memory."""
    return (f"[ooda: the command was killed: it used more than {limit // MIB} MiB of memory "
            "(OODA_SANDBOX_MEMORY_MB)]")


def _fs_used(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def written_since(root: Path, since: float) -> int:
    """Bytes of disk held by the inodes under `root` changed at or after `since` (time.time()).

    Iterative (a tree of any depth), never follows a link, counts a hard-linked inode once."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(root)]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)
            if info.st_ctime < since or (info.st_dev, info.st_ino) in seen:
                continue
            seen.add((info.st_dev, info.st_ino))
            total += info.st_blocks * 512
    return total


class DiskWatch:
    """Watches what one command writes to `workspace`; `exceeded()` is cheap until the host
    filesystem grew by the allowance left, then it measures the workspace itself."""

    def __init__(self, workspace: Path, limit: int) -> None:
        self.workspace = workspace
        self.limit = limit
        self.since = time.time() - CTIME_SLACK_S
        try:
            self._trigger: int | None = _fs_used(workspace) + limit
        except OSError:
            self._trigger = None

    def exceeded(self) -> bool:
        """True once the command's writes to the workspace hold more than the limit."""
        if self._trigger is None:
            return False
        try:
            used = _fs_used(self.workspace)
        except OSError:
            return False
        if used <= self._trigger:
            return False
        written = written_since(self.workspace, self.since)
        if written > self.limit:
            return True
        self._trigger = used + (self.limit - written)  # others wrote the rest: wait for more
        return False
