"""`storage_problem(exc)`: an OSError that is the machine's storage (a full disk, a quota, a
read-only file system), said in one line that names the path, or None for any other error.

These are not bugs: `ooda` says them as infrastructure failures (exit 3), where a bug would
say "internal error"; `ooda eval` stops on the first one and keeps the tasks already finished.
Standard library only."""

from __future__ import annotations

import errno

STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
}


def storage_problem(exc: BaseException) -> str | None:
    """`no space left on device (writing /runs/e1/summary.json)`, or None."""
    if not isinstance(exc, OSError) or exc.errno not in STORAGE_ERRNOS:
        return None
    what = STORAGE_ERRNOS[exc.errno]
    return f"{what} (writing {exc.filename})" if exc.filename else what
