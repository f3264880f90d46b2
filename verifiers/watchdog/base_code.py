"""What the unpatched repository already has, for the watchdog's baseline: each file's lines
(stripped), read once and lazily; the first line of the statement holding a given line (an edit
that enters a call in its middle); the file a code block naming none most likely rewrites."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable


class BaseCode:
    """Lines the repository already has, stripped, per file; read once per file, lazily.

    `read(path)` gives a file of the unpatched repository (None: absent); `python_files()`
    lists the repository's Python files, read all at once only the first time a code block
    that names no file of the repository needs them. One may serve the answers of a run from
    several threads (what it caches is only ever added, the same for every thread)."""

    def __init__(self, read: Callable[[str], str | None],
                 python_files: Callable[[], Iterable[str]] | None = None) -> None:
        self._read = read
        self._python_files = python_files
        self._files: dict[str, frozenset[str] | None] = {}
        self._texts: dict[str, list[str] | None] = {}
        self._starts: dict[str, list[int]] = {}
        self._everywhere: frozenset[str] | None = None

    def read(self, path: str) -> str | None:
        return self._read(path)

    def text_lines(self, path: str) -> list[str] | None:
        """The file's lines, in order (None: absent)."""
        if path not in self._texts:
            text = self._read(path)
            self._texts[path] = None if text is None else text.splitlines()
        return self._texts[path]

    def statement_start(self, path: str, index: int) -> int:
        """The first line (from 0) of the innermost statement of the file that holds line
        `index`: where a call that an edit enters in its middle begins. `index` itself when
        the file does not parse."""
        if path not in self._starts:
            self._starts[path] = _statement_starts(self.read(path) or "")
        starts = self._starts[path]
        return starts[index] if 0 <= index < len(starts) else index

    def locate(self, path: str, line: str) -> int | None:
        """The index of the one line of the file equal to `line` (stripped); None when there
        is none or more than one."""
        lines = self.text_lines(path)
        if lines is None:
            return None
        text = line.strip()
        found = [i for i, ln in enumerate(lines) if ln.strip() == text]
        return found[0] if len(found) == 1 else None

    def lines_of(self, path: str) -> frozenset[str] | None:
        if path not in self._files:
            text = self._read(path)
            self._files[path] = (None if text is None
                                 else frozenset(ln.strip() for ln in text.splitlines()))
        return self._files[path]

    def has(self, paths: tuple[str, ...], line: str, anywhere: bool) -> bool:
        """Whether `line` (stripped) is in one of `paths`, or with `anywhere` (a code block)
        when none of them is a file of the repository, in any of its Python files."""
        text = line.strip()
        readable = False
        for path in paths:
            lines = self.lines_of(path)
            if lines is not None:
                readable = True
                if text in lines:
                    return True
        return anywhere and not readable and text in self._all_lines()

    def likeliest(self, lines: list[str]) -> str | None:
        """The Python file of the repository holding most of `lines` (stripped, blank ones
        left out); None when none holds any or two hold as many."""
        wanted = {ln for ln in lines if ln}
        self._all_lines()
        files = list(self._files.items())  # a snapshot: other answers' threads add files
        scores = sorted(((len(wanted & found), path) for path, found in files
                         if found and path.endswith(".py")), reverse=True)
        if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
            return None
        return scores[0][1]

    def _all_lines(self) -> frozenset[str]:
        if self._everywhere is None:
            found: set[str] = set()
            for path in self._python_files() if self._python_files else ():
                lines = self.lines_of(path)
                if lines:
                    found |= lines
            self._everywhere = frozenset(found)
        return self._everywhere


def _statement_starts(source: str) -> list[int]:
    """For each line of `source` (from 0), the first line of the innermost statement holding
    it (the line itself where no statement spans it, or the source does not parse)."""
    count = len(source.splitlines())
    starts = list(range(count))
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return starts
    spans = []
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            last = (node.end_lineno or node.lineno) - 1
            body = getattr(node, "body", None)
            if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                last = max(node.lineno - 1, body[0].lineno - 2)  # a compound's header only
            spans.append((node.lineno - 1, last))
    for first, last in sorted(spans, key=lambda span: span[0] - span[1]):  # outermost first
        for index in range(first, min(last, count - 1) + 1):
            starts[index] = first
    return starts
