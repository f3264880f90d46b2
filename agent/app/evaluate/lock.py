"""One writer per evaluation directory: `ooda eval` (and `--predictions`) hold a lock on it.

Two invocations appending to one results.jsonl count tasks twice and skew every metric, so
the second is refused (exit 2) with who holds the directory, as uv, tox and pytest-xdist lock
what they write. The lock is an advisory `flock` on `<eval_dir>/.ooda-eval.lock` (the kernel
releases it when its holder dies, however it dies), so a lock left by a killed process is
stale by construction and is taken over; the file names the holder (pid, host, start) for
the message. Standard library only: `filelock` takes the same `flock` but keeps nothing in
the file to name its holder.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError

LOCK_FILE = ".ooda-eval.lock"


@contextlib.contextmanager
def evaluation_lock(eval_dir: Path, eval_id: str,
                    say: Callable[[str], None] = lambda _line: None) -> Iterator[None]:
    """Hold `eval_dir`'s lock for the block (the directory is made if missing, and removed
    again on the way out if the lock file was all it held). Raises UsageError when another
    live process holds it; `say` hears of a stale holder's lock being taken over."""
    made = not eval_dir.exists()
    eval_dir.mkdir(parents=True, exist_ok=True)
    path = eval_dir / LOCK_FILE
    fd = _acquire(path, eval_id, say)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # unlinked while held: the next holder's file is new
            path.unlink()
        os.close(fd)
        if made:
            with contextlib.suppress(OSError):  # only if empty: nothing else was written
                eval_dir.rmdir()


def holder(eval_dir: Path) -> dict[str, Any] | None:
    """Who holds `eval_dir`'s lock now (pid, host, started), or None when nobody does."""
    path = eval_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        if _try_lock(fd, fcntl.LOCK_SH):
            return None
        return _read(path)
    finally:
        os.close(fd)


def _acquire(path: Path, eval_id: str, say: Callable[[str], None]) -> int:
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            if not _try_lock(fd, fcntl.LOCK_EX):
                raise UsageError(_held_message(eval_id, _read(path)))
            if not _same_file(fd, path):  # the holder unlinked it as we opened it: again
                os.close(fd)
                continue
            stale = _read(path)
            if stale:
                say(f"taking over the lock of {_who(stale)}, which is no longer running")
            _write(fd, path)
            return fd
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise


def _try_lock(fd: int, kind: int) -> bool:
    try:
        fcntl.flock(fd, kind | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _write(fd: int, path: Path) -> None:
    text = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    os.ftruncate(fd, 0)
    os.pwrite(fd, (text + "\n").encode(), 0)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8") or "{}")
    except (OSError, ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _who(info: dict[str, Any]) -> str:
    pid, host = info.get("pid"), info.get("host")
    if pid is None:
        return "another process"
    return f"pid {pid} on {host}" if host else f"pid {pid}"


def _held_message(eval_id: str, info: dict[str, Any]) -> str:
    since = f" since {info['started']}" if info.get("started") else ""
    return (f"evaluation {eval_id} is being run by {_who(info)}{since}: wait for it to "
            "finish, or stop it first (its results stay; then --resume)")
