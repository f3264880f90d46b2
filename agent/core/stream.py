"""Reading an answer while it streams: the files each attempt sees (the task's repo with its
parent's edits) and the on_text hook that stops a stream once the run is over or the answer's
edits can no longer apply.

Apart from the loop because it is the one part that runs on the model client's thread, once
per arriving chunk: it must stay cheap (only newly completed lines are scanned).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable
from pathlib import Path

from ooda.agent import edits
from ooda.agent.core import prompts
from ooda.agent.core.records import Attempt

_REPLACE_LINE = re.compile(r"^[ \t]*>{5,9} ?REPLACE\b.*\n", re.MULTILINE)
"""A completed end-of-block line (the forms agent/edits/__init__.py accepts)."""


class RepoView:
    """The task's repository as each attempt sees it; walks the repository at most once."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._files: list[str] | None = None
        self._lock = threading.Lock()

    def read_base(self, path: str) -> str | None:
        """A file of the unpatched repository."""
        return read_text(self.repo / path)

    def reader_for(self, attempt: Attempt) -> Callable[[str], str | None]:
        """Reads files as `attempt` sees them: the original, with its parent's edits."""
        parent_files = attempt.base_files

        def read(path: str) -> str | None:
            return parent_files[path] if path in parent_files else self.read_base(path)

        return read

    def lister_for(self, attempt: Attempt) -> Callable[[], list[str]]:
        """Lists the files `attempt` sees: the repository's, with the files its parent
        created."""
        created = list(attempt.base_files)

        def listing() -> list[str]:
            with self._lock:
                if self._files is None:
                    self._files = list_repo(self.repo)
                files = self._files
            return sorted({*files, *created})

        return listing


def stream_watcher(
    stop: threading.Event, attempt: Attempt, read: Callable[[str], str | None]
) -> Callable[[str], bool]:
    """on_text hook: stop a stream once `stop` is set or its edits cannot apply (the reason
    goes into attempt.reason).

    The answer is re-parsed only when another `>>>>>>> REPLACE` line is complete (its
    newline has arrived: edits.partial_answer_is_hopeless ignores an unfinished last line),
    and only the newly completed lines are scanned for it."""
    scanned = 0

    def keep_going(text: str) -> bool:
        nonlocal scanned
        attempt.streamed_chars = len(text)  # the live display counts tokens from it
        if stop.is_set():
            return False
        end = text.rfind("\n") + 1
        if end <= scanned:
            return True
        completed = _REPLACE_LINE.search(text, scanned, end) is not None
        scanned = end
        if completed:
            problem = edits.partial_answer_is_hopeless(text, read)
            if problem:
                attempt.reason = f"stopped while streaming: {problem}"
                return False
        return True

    return keep_going


def list_repo(root: Path) -> list[str]:
    """The repository's files, repo-relative, skipping VCS, cache and virtualenv folders
    (an iterative walk: no recursion limit on deep trees)."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in prompts.SKIP_DIRS]
        rel = Path(folder).relative_to(root)
        found += [(rel / n).as_posix() for n in names]
    return found


def read_text(path: Path) -> str | None:
    """A base file's text; None when it is missing or unreadable as UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
