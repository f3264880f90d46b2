"""Reading an answer while it streams: the files each attempt sees (the task's repo with its
parent's edits) and the on_text hook that stops a stream once the run is over, the answer's
edits can no longer apply, or it has talked too long without beginning one.

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
from ooda.agent.context.index import SKIP_DIRS
from ooda.agent.core.records import Attempt
from ooda.agent.support.text import CHARS_PER_TOKEN, estimate_tokens

_REPLACE_LINE = re.compile(r"^[ \t]*>{5,9} ?REPLACE\b.*\n", re.MULTILINE)
"""A completed end-of-block line (the forms agent/edits/__init__.py accepts)."""


PROSE_CHECK_EVERY = 256
"""Characters between two looks at an answer's prose (each look reads the whole answer)."""


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
            with self._lock:
                if self._files is None:
                    self._files = list_repo(self.repo)
                files = self._files
            return sorted({*files, *created})

        return listing


def stream_watcher(
    stop: threading.Event, attempt: Attempt, read: Callable[[str], str | None],
    max_prose_tokens: int = 0,
    views: edits.Views | None = None,
) -> Callable[[str], bool]:
    """on_text hook: stop a stream once `stop` is set, its edits cannot apply, or it has
    streamed `max_prose_tokens` (~4 characters each; 0: no limit) of prose with no edit begun
    (the reason goes into attempt.reason, its kind into attempt.invalid_kind).

    The answer is re-parsed only when another `>>>>>>> REPLACE` line is complete (its
    newline has arrived: edits.partial_answer_is_hopeless ignores an unfinished last line),
    and only the newly completed lines are scanned for it; prose is looked at once the answer
    is long enough to hold the limit, and only until an edit begins."""
    scanned = 0
    editing = max_prose_tokens <= 0
    prose_checked = max_prose_tokens * CHARS_PER_TOKEN - PROSE_CHECK_EVERY

    def keep_going(text: str) -> bool:
        nonlocal scanned, editing, prose_checked
        attempt.streamed_chars = len(text)  # the live display counts tokens from it
        attempt.streamed = text  # what Ctrl-C keeps
        if stop.is_set():
            return False
        if not editing and len(text) >= prose_checked + PROSE_CHECK_EVERY:
            prose_checked = len(text)
            # all but the last few characters: a fence may be arriving there
            prose = edits.prose_before_edits(text[: len(text) - 8])
            editing = prose is None
            if prose is not None and estimate_tokens(prose) >= max_prose_tokens:
                attempt.reason = (f"stopped while streaming: {estimate_tokens(prose):,} tokens "
                                  "of prose and no edit begun; answer with SEARCH/REPLACE "
                                  "blocks")
                attempt.invalid_kind = "prose_only"
                return False
        end = text.rfind("\n") + 1
        if end <= scanned:
            return True
        completed = _REPLACE_LINE.search(text, scanned, end) is not None
        scanned = end
        if completed:
            problem = edits.partial_answer_is_hopeless(text, read, views)
            if problem:
                attempt.reason = f"stopped while streaming: {problem}"
                attempt.invalid_kind = "hopeless_edit"
                return False
        return True

    return keep_going


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
