"""The files each attempt sees: the task's repository with its parent's edits (what a
candidate source reads and an answer's edits apply to). The checks an answer meets while it
streams are agent/core/checks/."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from ooda.agent import edits
from ooda.agent.context.index import SKIP_DIRS
from ooda.agent.core.records import Attempt


class RepoView:
    """The task's repository as each attempt sees it; walks the repository at most once."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._files: list[str] | None = None
        self._lock = threading.Lock()

    def read_base(self, path: str) -> str | None:
        """A file of the unpatched repository."""
        return read_text(self.repo / path, path)

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
            return sorted({*self.files(), *created})

        return listing

    def files(self) -> list[str]:
        """The unpatched repository's files (walked once)."""
        with self._lock:
            if self._files is None:
                self._files = list_repo(self.repo)
            return self._files


def list_repo(root: Path) -> list[str]:
    """The repository's files, repo-relative, skipping VCS, cache and virtualenv folders
    (an iterative walk: no recursion limit on deep trees)."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS]
        rel = Path(folder).relative_to(root)
        found += [(rel / n).as_posix() for n in names]
    return found


def read_text(path: Path, name: str | None = None) -> str | None:
    """A base file's text; None when it is missing or unreadable; edits.NotEditable (an
    EditError naming the file as `name`) when it is there but not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise edits.NotEditable(name or path.name, data) from None
