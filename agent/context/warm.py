"""A repository's context index built ahead, in a process of its own, into the cache.

A run with a test command asks the model only once the unpatched code has been checked; on a
large repository the first prompt then also waits for the index to be built (tens of seconds
at 20,000 files). `start(repo)` builds it meanwhile, while the sandboxes are filled and the base
runs, so that the prompt finds it in the cache (agent/context/store.py). A process, not a
thread: an indexing thread would hold the interpreter's lock against the thread copying the
repository into the sandboxes, a copy made of many short system calls that each need that lock
back (the copy slowed as much as the index gained); a process runs beside it on another core.

    python -m ooda.agent.context.warm REPO
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ooda.tasks.loader import Task

WAIT_S = 600.0
"""Longest a run waits for the index being built before building it itself."""


def start(repo: Path, task: Task | None = None) -> subprocess.Popen[bytes] | None:
    """Start building `repo`'s index in a child process (None: a repository small enough to be
    shown whole needs none; one too large to index whole has `task`'s part of it chosen and
    indexed in a thread instead (agent/context/quick.py: a second or two); or it could not be
    started: the prompt then builds it as before)."""
    from ooda.agent.context import quick
    from ooda.agent.context.choose import MAX_WHOLE_FILES, shown_tests
    from ooda.agent.context.index import more_python_than

    if not more_python_than(repo, MAX_WHOLE_FILES):
        return None
    if more_python_than(repo, quick.min_files()):
        if task is not None:
            quick.choose_ahead(repo, task.statement, shown_tests(task))
        return None
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "ooda.agent.context.warm", str(repo)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)  # a Ctrl-C in the terminal is the run's to handle
    except OSError:
        return None


def finish(child: subprocess.Popen[bytes] | None, timeout_s: float = WAIT_S) -> None:
    """Wait for `child` to have cached the index (the prompt that follows reads it), at most
    `timeout_s`; a child still running then is stopped."""
    if child is None:
        return
    with contextlib.suppress(subprocess.TimeoutExpired):
        child.wait(timeout_s)
    stop(child)


def stop(child: subprocess.Popen[bytes] | None) -> None:
    """End `child` if it still runs (the run ended first)."""
    if child is not None and child.poll() is None:
        child.kill()
        child.wait()


def main() -> None:
    from ooda.agent.context.index import load_index

    load_index(Path(sys.argv[1]))


if __name__ == "__main__":
    main()
