"""What every edit format shares: the error, the result, the evolving files, text helpers.

Pure: the only I/O is the `read_file` callback (a file's base content, None when absent)
and the `list_files` callback (the repository's files), both passed in by the caller.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from ooda.agent.edits.views import Views

ReadFile = Callable[[str], str | None]
"""Repo-relative path -> the file's current text, or None when there is no such file; raises
NotEditable for a file that exists but is not UTF-8 text."""
ListFiles = Callable[[], list[str]]
"""The repository's files (repo-relative paths), for formats that must find a file."""


class EditError(Exception):
    """The answer's edits cannot be applied; the message says why, fit for the model.

    `kind` is a short, stable name of the reason (counted by the eval report)."""

    def __init__(self, message: str, kind: str = "invalid") -> None:
        super().__init__(message)
        self.kind = kind


class NotEditable(EditError):
    """A file that exists but is not UTF-8 text (a PEP 263 `coding: latin-1` source, a
    binary): ooda edits UTF-8 files only, as ruff reads them and Aider writes them by default,
    so the model is told the file cannot be edited, never that it does not exist."""

    def __init__(self, path: str, data: bytes) -> None:
        super().__init__(f"{path} cannot be edited: {_encoding_of(data)}; ooda edits UTF-8 "
                         "files only. Leave it as it is and make the fix elsewhere", "not_utf8")


def _encoding_of(data: bytes) -> str:
    """What `data` is, as Python's own reading of a source file (PEP 263) says it."""
    import io
    import tokenize

    try:
        declared, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError:
        return "it is not UTF-8 text"
    if declared not in ("utf-8", "utf-8-sig"):
        return f"it is encoded in {declared} (its PEP 263 coding declaration)"
    return "it is not UTF-8 text"


@dataclass
class ParsedEdits:
    """All the edits of one answer, applied to the base files."""

    patch: str
    """One `git apply`-able unified diff of every changed file."""
    files: dict[str, str]
    """Repo-relative path -> the file's new full content (changed files only)."""
    edit_format: str = "search_replace"
    """The format the answer was read in (a name of ooda.agent.edits.FORMATS, or two joined
    by "+" when SEARCH/REPLACE blocks and diffs are mixed)."""


@dataclass
class Context:
    """What a format may consult besides the answer: the files, through callbacks."""

    read_file: ReadFile
    list_files: ListFiles | None = None
    views: Views | None = None
    """What the model saw of each file it was shown (None: every file as it is)."""
    _listed: list[str] | None = field(default=None, repr=False)

    def files(self) -> list[str]:
        """The repository's files (listed once); empty when no lister was given."""
        if self._listed is None:
            self._listed = sorted(self.list_files()) if self.list_files is not None else []
        return self._listed


# --------------------------------------------------------------------------- paths


def check_path(path: str, where: str) -> str:
    """The normalised repo-relative path; EditError when it is absolute or escapes the repo."""
    norm = path.replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or norm.startswith("~"):
        raise EditError(
            f"{where}: path {path!r} is absolute; use a path relative to the repo", "bad_path"
        )
    if ".." in parts:
        raise EditError(
            f"{where}: path {path!r} contains '..'; stay inside the repository", "bad_path"
        )
    if any(p == ".git" for p in parts):
        raise EditError(
            f"{where}: path {path!r} points into .git/, which may not be edited", "bad_path"
        )
    if not parts or any(ch.isspace() or ord(ch) < 32 for ch in norm):
        raise EditError(f"{where}: {path!r} is not a usable file path", "bad_path")
    return "/".join(parts)


# --------------------------------------------------------------------------- text helpers


def split_lines(text: str) -> list[str]:
    """Lines with their terminators ("\\n" or "\\r\\n"); the last may lack one."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def body(line: str) -> str:
    """A line without its terminator."""
    return line.removesuffix("\n").removesuffix("\r")


def bodies(text: str) -> list[str]:
    """The lines of `text` without terminators."""
    return [body(line) for line in split_lines(text)]


def eol(lines: list[str]) -> str:
    """The file's dominant line terminator."""
    crlf = sum(1 for line in lines if line.endswith("\r\n"))
    lf = sum(1 for line in lines if line.endswith("\n"))
    return "\r\n" if lf and crlf * 2 > lf else "\n"


def splice(text: str, start: int, count: int, new: list[str]) -> str:
    """Replace `count` lines at `start` with `new` (bodies), in the file's own line endings,
    keeping its trailing-newline state."""
    lines = split_lines(text)
    ending = eol(lines)
    no_final_newline = bool(lines) and not lines[-1].endswith("\n")
    if no_final_newline:
        lines[-1] += ending
    lines[start : start + count] = [line + ending for line in new]
    result = "".join(lines)
    if no_final_newline and result.endswith(ending):
        result = result[: -len(ending)]
    return result


def quote(lines: list[str], limit: int = 6, start: int | None = None) -> str:
    """A few lines, indented, for an error message (numbered when `start` is given)."""
    shown = lines[:limit]
    if start is None:
        out = [f"    {line}" for line in shown]
    else:
        out = [f"    {start + k:>5}: {line}" for k, line in enumerate(shown)]
    if len(lines) > limit:
        out.append(f"    ... ({len(lines) - limit} more lines)")
    return "\n".join(out)


# --------------------------------------------------------------------------- locating lines


def _strip_comment(line: str) -> str:
    """`line` without a trailing `# comment` (a `#` outside string quotes)."""
    quote_char = ""
    for k, ch in enumerate(line):
        if quote_char:
            if ch == quote_char:
                quote_char = ""
        elif ch in "'\"":
            quote_char = ch
        elif ch == "#":
            return line[:k]
    return line


def _exact(line: str) -> str:
    return line


def _rstripped(line: str) -> str:
    return line.rstrip()


def _loose(line: str) -> str:
    """Indentation, runs of spaces and trailing comments ignored."""
    return " ".join(_strip_comment(line).split())


LEVELS: tuple[tuple[str, Callable[[str], str]], ...] = (
    ("exact", _exact),
    ("trailing whitespace", _rstripped),
    ("whitespace, indentation and comments", _loose),
)
"""How tolerant each matching pass is, strictest first."""


def find_all(haystack: list[str], needle: list[str], key: Callable[[str], str]) -> list[int]:
    """Start indexes where `needle` occurs in `haystack` once both are mapped by `key`."""
    hay = [key(h) for h in haystack]
    ned = [key(n) for n in needle]
    k = len(ned)
    first = ned[0]
    return [i for i in range(len(hay) - k + 1) if hay[i] == first and hay[i : i + k] == ned]


def closest(haystack: list[str], needle: list[str]) -> str:
    """A hint: where the file holds lines most like the needle's first non-blank line."""
    if not haystack:
        return "The file is empty."
    anchor_index = next((k for k, n in enumerate(needle) if n.strip()), 0)
    anchor = needle[anchor_index].strip()
    stripped = [h.strip() for h in haystack]
    best = -1
    if anchor in stripped:
        best = stripped.index(anchor)
    else:
        matcher = difflib.SequenceMatcher(autojunk=False)
        matcher.set_seq2(anchor)
        best_ratio = 0.6
        for i, line in enumerate(stripped):
            matcher.set_seq1(line)
            if matcher.real_quick_ratio() < best_ratio or matcher.quick_ratio() < best_ratio:
                continue
            ratio = matcher.ratio()
            if ratio > best_ratio:
                best, best_ratio = i, ratio
    if best < 0:
        return "No similar lines were found in the file; check the path."
    start = max(0, best - anchor_index)
    shown = haystack[start : start + max(len(needle), 1)]
    return f"The closest lines in the file (line {start + 1}):\n" + quote(
        shown, limit=8, start=start + 1
    )


@dataclass(frozen=True)
class Match:
    """Where a needle was found, and how tolerantly."""

    start: int
    level: int
    """Index into LEVELS."""


def locate(
    text: str, needle: list[str], what: str, hint_index: int | None = None, window: int = 0
) -> Match:
    """Where `needle` occurs once in `text`: exact first, then ever more tolerant (LEVELS);
    a pass that finds it twice is an error, never a guess. With `hint_index`, a match within
    `window` lines of it wins over the others."""
    lines = bodies(text)
    for level, (_, key) in enumerate(LEVELS):
        found = find_all(lines, needle, key)
        if not found:
            continue
        if hint_index is not None:
            near = [i for i in found if abs(i - hint_index) <= window]
            if near:
                return Match(min(near, key=lambda i: abs(i - hint_index)), level)
        if len(found) == 1:
            return Match(found[0], level)
        at = ", ".join(str(i + 1) for i in found[:8])
        raise EditError(
            f"{what}: the lines to replace occur {len(found)} times (at lines {at}); "
            "include more surrounding lines so that they match exactly once:\n" + quote(needle),
            "ambiguous",
        )
    raise EditError(
        f"{what}: these lines were not found in the file (not even ignoring whitespace, "
        "indentation and comments):\n"
        + quote(needle)
        + "\n"
        + closest(lines, needle)
        + "\nCopy the lines from the file exactly, whitespace included.",
        "no_match",
    )


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def reindent(found: list[str], needle: list[str], new: list[str]) -> list[str]:
    """`new` moved to the indentation of the file's `found` lines when the `needle` they
    matched was indented differently (the first line pair whose indents differ gives the
    shift)."""
    pairs = [(f, n) for f, n in zip(found, needle, strict=False) if n.strip()]
    differing = [(f, n) for f, n in pairs if _indent_of(f) != _indent_of(n)]
    if not differing:
        return new
    file_indent, needle_indent = _indent_of(differing[0][0]), _indent_of(differing[0][1])
    first_new = next((line for line in new if line.strip()), "")
    if differing[0] == pairs[0] and _indent_of(first_new) == file_indent:
        return new  # REPLACE is written at the file's indentation already
    out = []
    for line in new:
        if line.startswith(needle_indent) and line.strip():
            out.append(file_indent + line[len(needle_indent) :])
        else:
            out.append(line)
    return out


def replace_lines(text: str, needle: list[str], new: list[str], what: str,
                  hint_index: int | None = None, window: int = 0) -> str:
    """`text` with the one occurrence of `needle` replaced by `new` (re-indented when it was
    found only by ignoring indentation)."""
    match = locate(text, needle, what, hint_index, window)
    if match.level > 0:
        found = bodies(text)[match.start : match.start + len(needle)]
        new = reindent(found, needle, new)
    return splice(text, match.start, len(needle), new)


# --------------------------------------------------------------------------- the files


class Workspace:
    """The evolving contents of the files the answer touches."""

    def __init__(self, read_file: ReadFile, views: Views | None = None) -> None:
        self._read_file = read_file
        self.views = views
        """What the model saw of the files (agent/edits/views.py); None: every file whole."""
        self.base: dict[str, str | None] = {}
        self.current: dict[str, str | None] = {}
        self.order: list[str] = []

    def get(self, path: str) -> str | None:
        if path not in self.current:
            content = self._read_file(path)
            self.base[path] = content
            self.current[path] = content
            self.order.append(path)
        return self.current[path]

    def set(self, path: str, content: str) -> None:
        self.get(path)
        self.current[path] = content

    def expand(self, path: str, lines: list[str]) -> list[str]:
        """`lines` of an edit to `path` with the view's marker lines expanded."""
        view = self.views.get(path) if self.views else None
        return view.expand(lines) if view is not None else lines

    def changed(self) -> dict[str, str]:
        """Path -> new content of every file that differs from its base."""
        return {
            path: new
            for path in self.order
            if (new := self.current[path]) is not None and new != self.base[path]
        }


# --------------------------------------------------------------------------- output


def _diff_lines(path: str, old: str | None, new: str) -> Iterator[str]:
    """git-style diff of one file, with "\\ No newline at end of file" markers."""
    yield f"diff --git a/{path} b/{path}\n"
    if old is None:
        yield "new file mode 100644\n"
        if not new:
            return
    a = split_lines(old or "")
    b = split_lines(new)
    fromfile = "/dev/null" if old is None else f"a/{path}"
    for line in difflib.unified_diff(a, b, fromfile, f"b/{path}"):
        if line.endswith("\n"):
            yield line
        else:
            yield line + "\n\\ No newline at end of file\n"


def make_patch(files: dict[str, str], read_base: ReadFile) -> str:
    """One `git apply`-able diff turning the base files (`read_base(path)`, None when
    absent) into `files` (path -> full new content); files left as they were are skipped,
    so the patch is empty when nothing changed."""
    chunks: list[str] = []
    for path, new in files.items():
        old = read_base(path)
        if new != old:
            chunks.extend(_diff_lines(path, old, new))
    return "".join(chunks)
