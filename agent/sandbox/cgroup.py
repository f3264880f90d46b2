"""A memory cgroup for one bwrap sandbox: bubblewrap has no resource limits of its own.

Docker puts each container in a memory cgroup; for bwrap the host makes one itself (as root,
under the cgroup v2 root or the v1 memory hierarchy), caps memory and swap, and starts each
command inside it (`enter_argv`). Where no cgroup can be made (not root, a read-only cgroupfs)
`MemoryCgroup.create` says why and the sandbox keeps only its RLIMIT_AS bound.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
ENTER = 'echo $$ > "$0" && exec "$@"'
_names = itertools.count()


class MemoryCgroup:
    """One cgroup with a memory (and swap) limit; `oom_kills()` counts what it killed."""

    def __init__(self, path: Path, v2: bool) -> None:
        self.path = path
        self.v2 = v2

    @classmethod
    def create(cls, limit: int) -> tuple[MemoryCgroup | None, str]:
        """A new cgroup capped at `limit` bytes, or (None, why not)."""
        v2 = (ROOT / "cgroup.controllers").exists()
        parent = ROOT if v2 else ROOT / "memory"
        if v2 and "memory" not in _read(parent / "cgroup.subtree_control").split():
            return None, "the cgroup v2 root does not delegate the memory controller"
        if not v2 and not (parent / "memory.limit_in_bytes").exists():
            return None, "no cgroup v2 and no v1 memory hierarchy under /sys/fs/cgroup"
        path = parent / f"ooda-{os.getpid()}-{next(_names)}"
        try:
            path.mkdir()
        except OSError as exc:
            return None, f"cannot create a cgroup ({exc.strerror})"
        group = cls(path, v2)
        try:
            if v2:
                (path / "memory.max").write_text(str(limit))
                with contextlib.suppress(OSError):  # no swap accounting: no swap to fill
                    (path / "memory.swap.max").write_text("0")
            else:
                (path / "memory.limit_in_bytes").write_text(str(limit))
                with contextlib.suppress(OSError):
                    (path / "memory.memsw.limit_in_bytes").write_text(str(limit))
        except OSError as exc:
            group.remove()
            return None, f"cannot set a memory limit ({exc.strerror})"
        return group, ""

    def enter_argv(self) -> list[str]:
        """A prefix that moves the command into this cgroup before it runs (exec: same pid)."""
        return ["/bin/sh", "-c", ENTER, str(self.path / "cgroup.procs")]

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this cgroup for lack of memory so far."""
        text = _read(self.path / ("memory.events" if self.v2 else "memory.oom_control"))
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def remove(self, patience_s: float = 2.0) -> None:
        """Delete the cgroup (once its last process is gone; a few retries for late exits)."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.05)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
