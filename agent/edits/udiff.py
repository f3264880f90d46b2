"""Unified diffs in a fenced block (```diff, or any fence whose body starts like a diff).

Parsed with `unidiff`. Models often miscount the line counts in hunk headers (or leave the
numbers out: `@@ ... @@`); unidiff then either raises or, when a count is too small,
silently ends the hunk early and drops the rest. So every diff block is also read by a small
tolerant parser that ignores the counts; its reading is used when unidiff raises or when the
two readings disagree about the hunks' lines. Hunks are located by their context and removed
lines (with the same tolerant passes as SEARCH parts), never by their line numbers alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from ooda.agent.edits.base import (
    EditError,
    Workspace,
    body,
    check_path,
    replace_lines,
    splice,
    split_lines,
)
from ooda.agent.edits.scan import SEARCH_RE, Fence

_HUNK_HEADER_RE = re.compile(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_DIFF_LANGS = {"diff", "patch", "udiff", "git"}


@dataclass
class Hunk:
    """One hunk: its stated old start and its body lines."""

    old_start: int | None
    """1-based line the hunk claims to start at; None when the header has no numbers."""
    lines: list[tuple[str, str]] = field(default_factory=list)
    """(kind, text) with kind one of ' ', '-', '+'."""

    @property
    def old(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "+"]

    @property
    def new(self) -> list[str]:
        return [text for kind, text in self.lines if kind != "-"]


@dataclass
class FileDiff:
    """The hunks of one file."""

    old_path: str | None
    """None for /dev/null (a created file)."""
    new_path: str | None
    """None for /dev/null (a deleted file)."""
    hunks: list[Hunk] = field(default_factory=list)


@dataclass
class DiffBlock:
    """One fenced diff block."""

    number: int
    text: str


def _header_path(raw: str) -> str | None:
    """A ---/+++ header's file name without timestamp and quotes; None for /dev/null."""
    name = raw.split("\t")[0].strip()
    if len(name) >= 2 and name[0] == name[-1] == '"':
        name = name[1:-1]
    return None if name == "/dev/null" else name


def _file_paths(old_raw: str, new_raw: str) -> tuple[str | None, str | None]:
    """Header names -> repo paths, dropping git's a/ and b/ prefixes when they are used."""
    old, new = _header_path(old_raw), _header_path(new_raw)
    prefixed = (old is None or old.startswith("a/")) and (new is None or new.startswith("b/"))
    if prefixed and not (old is None and new is None):
        old = None if old is None else old[2:]
        new = None if new is None else new[2:]
    return old, new


def _parse_with_unidiff(text: str) -> list[FileDiff]:
    """Read a diff with unidiff; raises whatever unidiff raises on malformed input."""
    from unidiff.patch import PatchSet

    files: list[FileDiff] = []
    for patched in PatchSet(text):
        old, new = _file_paths(patched.source_file or "", patched.target_file or "")
        fd = FileDiff(old, new)
        for hunk in patched:
            h = Hunk(hunk.source_start)
            for line in hunk:
                if line.line_type in (" ", "-", "+"):
                    h.lines.append((line.line_type, body(line.value)))
            fd.hunks.append(h)
        files.append(fd)
    return files


def _parse_tolerant(text: str) -> list[FileDiff]:
    """Read a diff ignoring the hunk headers' line counts; a blank line inside a hunk is a
    blank context line, and trailing blank lines of a hunk are dropped."""
    lines = text.split("\n")
    files: list[FileDiff] = []
    current: FileDiff | None = None
    hunk: Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _file_paths(line[4:], lines[i + 1][4:])
            current = FileDiff(old, new)
            files.append(current)
            hunk = None
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                raise EditError("a hunk (@@ line) comes before any ---/+++ file header",
                                "bad_diff")
            match = _HUNK_HEADER_RE.match(line)
            hunk = Hunk(int(match.group(1)) if match else None)
            current.hunks.append(hunk)
            i += 1
            continue
        if hunk is not None:
            if line[:1] in (" ", "-", "+"):
                hunk.lines.append((line[0], line[1:]))
            elif line == "":
                hunk.lines.append((" ", ""))
            elif not line.startswith("\\"):
                hunk = None
        i += 1
    _trim(files)
    return files


def _trim(files: list[FileDiff]) -> None:
    for fd in files:
        for h in fd.hunks:
            while h.lines and h.lines[-1] == (" ", ""):
                h.lines.pop()


def parse_diff(text: str) -> list[FileDiff]:
    """unidiff's reading when it succeeds and agrees with the tolerant one; else tolerant."""
    tolerant = _parse_tolerant(text)
    try:
        strict = _parse_with_unidiff(text)
    except Exception:
        return tolerant
    _trim(strict)
    return strict if strict == tolerant else tolerant


class UnifiedDiff:
    """Unified diffs in fenced blocks, hunk by hunk."""

    name: ClassVar[str] = "udiff"
    prompt: ClassVar[str] = (
        "A unified diff in a ```diff block (with --- a/path and +++ b/path headers) is also "
        "accepted."
    )
    asked: ClassVar[bool] = True
    begins: ClassVar[str] = r"--- |\+\+\+ |@@ |diff --git "
    completes: ClassVar[str | None] = None

    def reader(self, lines: list[str], fences: list[Fence]) -> _Reader:
        return _Reader({f.start: f for f in fences if self.is_diff(f)})

    def apply_block(self, ws: Workspace, block: object) -> bool:
        assert isinstance(block, DiffBlock)
        return self.apply(ws, block)

    @staticmethod
    def is_diff(fence: Fence) -> bool:
        """True when a fenced block holds a diff (and no SEARCH/REPLACE block)."""
        if any(SEARCH_RE.match(b) for b in fence.body):
            return False
        if fence.lang in _DIFF_LANGS:
            return True
        lines = fence.body
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            if line.startswith("diff --git "):
                return True
            return line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith(
                "+++ ")
        return False

    @staticmethod
    def apply(ws: Workspace, block: DiffBlock) -> bool:
        """Apply one fenced diff block; False when it holds no file diff at all."""
        what = f"diff block {block.number}"
        files = parse_diff(block.text)
        if not files:
            return False
        for fd in files:
            _apply_file(ws, fd, what)
        return True


def _apply_file(ws: Workspace, fd: FileDiff, what: str) -> None:
    if fd.new_path is None:
        name = fd.old_path or "?"
        raise EditError(f"{what}: deleting files ({name}) is not supported; edit it instead",
                        "bad_diff")
    path = check_path(fd.new_path, what)
    if fd.old_path is not None and check_path(fd.old_path, what) != path:
        raise EditError(
            f"{what}: renaming {fd.old_path} to {fd.new_path} is not supported; "
            "use the same path in the --- and +++ headers", "bad_diff")
    if not fd.hunks:
        raise EditError(f"{what} ({path}): no hunks (lines starting with @@) found", "bad_diff")
    content = ws.get(path)
    if content is None and all(not h.old for h in fd.hunks):
        fd.old_path = None  # `--- a/new.py` with only `@@ -0,0` hunks: a creation too
    if fd.old_path is None:
        if content is not None and content.strip():
            raise EditError(
                f"{what}: {path} already exists, but the diff creates it (--- /dev/null)",
                "exists")
        created = [text for h in fd.hunks for text in h.new]
        ws.set(path, "".join(line + "\n" for line in created))
        return
    if content is None:
        raise EditError(
            f"{what}: {path} does not exist. To create a file use `--- /dev/null`; "
            "otherwise check the path (relative to the repository root)", "missing_file")
    offset = 0
    for number, h in enumerate(fd.hunks, start=1):
        hunk_what = f"{what}, hunk {number} ({path})"
        old, new = _expanded(ws, path, h)
        if not old:
            # a pure insertion: "@@ -N,0" inserts after line N (git's convention)
            n_lines = len(split_lines(content))
            at = n_lines if h.old_start is None else min(h.old_start + offset, n_lines)
            content = splice(content, at, 0, new)
        else:
            stated = None if h.old_start is None else max(h.old_start - 1, 0) + offset
            content = replace_lines(content, old, new, hunk_what, stated,
                                    window=max(10, len(old)))
        offset += len(new) - len(old)
        ws.set(path, content)


def _expanded(ws: Workspace, path: str, hunk: Hunk) -> tuple[list[str], list[str]]:
    """The hunk's old and new lines, with each marker line of a file shown in part (a context
    or removed line `# ... lines A-B not shown ...`) standing for the lines it elides; a marker
    on an added line is left as written."""
    old: list[str] = []
    new: list[str] = []
    for kind, text in hunk.lines:
        lines = ws.expand(path, [text]) if kind != "+" else [text]
        if kind != "+":
            old += lines
        if kind != "-":
            new += lines
    return old, new


class _Reader:
    """The fenced diffs of one answer, numbered."""

    def __init__(self, diffs: dict[int, Fence]) -> None:
        self.diffs = diffs
        self.count = 0

    def read(self, index: int) -> tuple[DiffBlock, int] | None:
        fence = self.diffs.get(index)
        if fence is None:
            return None
        self.count += 1
        return DiffBlock(self.count, "\n".join(fence.body) + "\n"), fence.end + 1
