"""Turn a model's answer into one unified diff: SEARCH/REPLACE blocks and ```diff blocks.

Pure: the only I/O is the `read_file` callback that returns a file's base content (or None
when the file does not exist). Every rejection is an `EditError` whose message is written
to be fed back to the model: which path, which block, what did not match, and a hint.

Unified diffs are parsed with `unidiff`. Models often miscount the line counts in hunk
headers (or leave the numbers out: `@@ ... @@`); unidiff then either raises or, when a count
is too small, silently ends the hunk early and drops the rest. So every diff block is also
read by a small tolerant parser that ignores the counts; its reading is used when unidiff
raises or when the two readings disagree about the hunks' lines. Hunks are located by their
context and removed lines, never by their line numbers alone.

The output patch is generated with difflib from the old and new contents, so it is always
well-formed and `git apply`-able whatever the answer looked like.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

ReadFile = Callable[[str], str | None]

__all__ = [
    "EditError",
    "ParsedEdits",
    "make_patch",
    "parse_edits",
    "partial_answer_is_hopeless",
]


class EditError(Exception):
    """The answer's edits cannot be applied; the message says why, fit for the model."""


@dataclass
class ParsedEdits:
    """All the edits of one answer, applied to the base files."""

    patch: str
    """One `git apply`-able unified diff of every changed file."""
    files: dict[str, str]
    """Repo-relative path -> the file's new full content (changed files only)."""


# --------------------------------------------------------------------------- scanning

_SEARCH_RE = re.compile(r"^\s*<{5,9} ?SEARCH\b.*$")
_DIVIDER_RE = re.compile(r"^\s*={5,9}\s*$")
_REPLACE_RE = re.compile(r"^\s*>{5,9} ?REPLACE\b.*$")
_FENCE_RE = re.compile(r"^\s*(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`]*?)\s*$")
_DIFF_LANGS = {"diff", "patch", "udiff", "git"}
_HUNK_HEADER_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_PATH_PREFIX_RE = re.compile(r"^(?:#+\s*|(?:file|path|filename)\s*:\s*)", re.IGNORECASE)
_NO_EDITS = (
    "no edits found: answer with SEARCH/REPLACE blocks (the file path alone on the line "
    "before `<<<<<<< SEARCH`, then `=======`, then `>>>>>>> REPLACE`) or with a unified "
    "diff in a ```diff block with `--- a/path` and `+++ b/path` headers"
)


@dataclass
class _Replace:
    """One SEARCH/REPLACE block."""

    number: int
    path: str
    search: list[str]
    replace: list[str]


@dataclass
class _Hunk:
    """One hunk of a unified diff: its stated old start and its body lines."""

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
class _FileDiff:
    """The hunks of one file in a unified diff."""

    old_path: str | None
    """None for /dev/null (a created file)."""
    new_path: str | None
    """None for /dev/null (a deleted file)."""
    hunks: list[_Hunk] = field(default_factory=list)


@dataclass
class _DiffBlock:
    """One fenced diff block."""

    number: int
    text: str


_Edit = _Replace | _DiffBlock


def _fence_info(line: str) -> tuple[str, str] | None:
    """(fence characters, info string) when `line` is a code fence line."""
    match = _FENCE_RE.match(line)
    if match is None:
        return None
    return match.group("fence"), match.group("info")


def _clean_path(line: str) -> str | None:
    """The path written on `line`, or None when the line does not look like a lone path."""
    text = line.strip()
    text = _PATH_PREFIX_RE.sub("", text).strip()
    text = text.strip("*_`'\"").strip()
    text = text.rstrip(":").strip().strip("`")
    if not text or len(text) > 300 or any(ch.isspace() for ch in text):
        return None
    if any(ch in text for ch in "<>|=*?\"'`"):
        return None
    return text


def _path_from_fence(info: str) -> str | None:
    """A path written on a fence line, as in ```python src/mod.py or ```src/mod.py."""
    for word in info.split():
        if "/" in word or ("." in word.strip(".")):
            path = _clean_path(word)
            if path is not None:
                return path
    return None


def _find_path(lines: list[str], index: int) -> str | None:
    """The path for the SEARCH marker at `index`: the nearest non-blank line above it,
    looking past one code fence line (whose info string may itself name the path)."""
    j = index - 1
    seen_fence = False
    while j >= 0 and index - j <= 4:
        line = lines[j]
        if not line.strip():
            j -= 1
            continue
        fence = _fence_info(line)
        if fence is not None and not seen_fence:
            seen_fence = True
            from_fence = _path_from_fence(fence[1])
            if from_fence is not None:
                return from_fence
            j -= 1
            continue
        if _SEARCH_RE.match(line) or _REPLACE_RE.match(line) or _DIVIDER_RE.match(line):
            return None
        return _clean_path(line)
    return None


def _looks_like_diff(body: list[str]) -> bool:
    """True when a fenced block's body starts like a unified diff."""
    for i, line in enumerate(body):
        if not line.strip():
            continue
        if line.startswith("diff --git "):
            return True
        return line.startswith("--- ") and i + 1 < len(body) and body[i + 1].startswith("+++ ")
    return False


def _scan(answer: str) -> list[_Edit]:
    """Every SEARCH/REPLACE block and fenced diff block of the answer, in order."""
    lines = answer.replace("\r\n", "\n").split("\n")
    edits: list[_Edit] = []
    n_blocks = 0
    n_diffs = 0
    last_path: str | None = None
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if _SEARCH_RE.match(line):
            n_blocks += 1
            block, i = _read_block(lines, i, n_blocks, last_path)
            last_path = block.path
            edits.append(block)
            continue
        fence = _fence_info(line)
        if fence is None:
            i += 1
            continue
        chars, info = fence
        lang = info.split()[0].lower() if info else ""
        if not lang and in_fence:
            in_fence = False
            i += 1
            continue
        end = i + 1
        while end < len(lines):
            closing = _fence_info(lines[end])
            if closing is not None and not closing[1] and closing[0].startswith(chars[0] * 3):
                break
            end += 1
        body = lines[i + 1 : end]
        has_block = any(_SEARCH_RE.match(b) for b in body)
        if not has_block and (lang in _DIFF_LANGS or _looks_like_diff(body)):
            n_diffs += 1
            edits.append(_DiffBlock(n_diffs, "\n".join(body) + "\n"))
            i = end + 1
            continue
        in_fence = True
        i += 1
    return edits


def _read_block(
    lines: list[str], start: int, number: int, last_path: str | None
) -> tuple[_Replace, int]:
    """Read the SEARCH/REPLACE block whose SEARCH marker is at `start`."""
    path = _find_path(lines, start) or last_path
    if path is None:
        raise EditError(
            f"SEARCH/REPLACE block {number}: no file path found; put the path (relative to "
            "the repository root) alone on the line before `<<<<<<< SEARCH`"
        )
    where = f"SEARCH/REPLACE block {number} ({path})"
    i = start + 1
    search: list[str] = []
    while i < len(lines) and not _DIVIDER_RE.match(lines[i]):
        if _SEARCH_RE.match(lines[i]) or _REPLACE_RE.match(lines[i]):
            raise EditError(f"{where}: missing `=======` between SEARCH and REPLACE")
        search.append(lines[i])
        i += 1
    if i >= len(lines):
        raise EditError(f"{where}: missing `=======` (the answer may have been cut off)")
    i += 1
    replace: list[str] = []
    while i < len(lines) and not _REPLACE_RE.match(lines[i]):
        if _SEARCH_RE.match(lines[i]):
            raise EditError(f"{where}: missing `>>>>>>> REPLACE` before the next block")
        replace.append(lines[i])
        i += 1
    if i >= len(lines):
        raise EditError(f"{where}: missing `>>>>>>> REPLACE` (the answer may have been cut off)")
    return _Replace(number, path, search, replace), i + 1


# --------------------------------------------------------------------------- paths


def _check_path(path: str, where: str) -> str:
    """The normalised repo-relative path; EditError when it is absolute or escapes the repo."""
    norm = path.replace("\\", "/")
    while norm.startswith("./"):
        norm = norm[2:]
    parts = [p for p in norm.split("/") if p not in ("", ".")]
    if norm.startswith("/") or re.match(r"^[A-Za-z]:", norm) or norm.startswith("~"):
        raise EditError(f"{where}: path {path!r} is absolute; use a path relative to the repo")
    if ".." in parts:
        raise EditError(f"{where}: path {path!r} contains '..'; stay inside the repository")
    if any(p == ".git" for p in parts):
        raise EditError(f"{where}: path {path!r} points into .git/, which may not be edited")
    if not parts or any(ch.isspace() or ord(ch) < 32 for ch in norm):
        raise EditError(f"{where}: {path!r} is not a usable file path")
    return "/".join(parts)


# --------------------------------------------------------------------------- text helpers


def _split(text: str) -> list[str]:
    """Lines with their terminators ("\\n" or "\\r\\n"); the last may lack one."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _body(line: str) -> str:
    """A line without its terminator."""
    return line.removesuffix("\n").removesuffix("\r")


def _eol(lines: list[str]) -> str:
    """The file's dominant line terminator."""
    crlf = sum(1 for line in lines if line.endswith("\r\n"))
    lf = sum(1 for line in lines if line.endswith("\n"))
    return "\r\n" if lf and crlf * 2 > lf else "\n"


def _find_all(haystack: list[str], needle: list[str], loose: bool) -> list[int]:
    """Start indexes where `needle` (bodies) occurs in `haystack` (bodies); `loose` ignores
    trailing whitespace."""
    if loose:
        haystack = [h.rstrip() for h in haystack]
        needle = [n.rstrip() for n in needle]
    k = len(needle)
    first = needle[0]
    return [
        i
        for i in range(len(haystack) - k + 1)
        if haystack[i] == first and haystack[i : i + k] == needle
    ]


def _splice(text: str, start: int, count: int, new: list[str]) -> str:
    """Replace `count` lines at `start` with `new` (bodies), in the file's own line endings,
    keeping its trailing-newline state."""
    lines = _split(text)
    eol = _eol(lines)
    no_final_newline = bool(lines) and not lines[-1].endswith("\n")
    if no_final_newline:
        lines[-1] += eol
    lines[start : start + count] = [line + eol for line in new]
    result = "".join(lines)
    if no_final_newline and result.endswith(eol):
        result = result[: -len(eol)]
    return result


def _quote(lines: list[str], limit: int = 6, start: int | None = None) -> str:
    """A few lines, indented, for an error message (numbered when `start` is given)."""
    shown = lines[:limit]
    if start is None:
        out = [f"    {line}" for line in shown]
    else:
        out = [f"    {start + k:>5}: {line}" for k, line in enumerate(shown)]
    if len(lines) > limit:
        out.append(f"    ... ({len(lines) - limit} more lines)")
    return "\n".join(out)


def _closest(haystack: list[str], needle: list[str]) -> str:
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
    return f"The closest lines in the file (line {start + 1}):\n" + _quote(
        shown, limit=8, start=start + 1
    )


def _indent_hint(haystack: list[str], needle: list[str]) -> str:
    """An extra sentence when the needle matches except for indentation."""
    stripped = [h.strip() for h in haystack]
    if _find_all(stripped, [n.strip() for n in needle], loose=False):
        return " The lines exist with different indentation: copy the indentation exactly."
    return ""


def _locate(
    text: str, needle: list[str], what: str, hint_index: int | None = None, window: int = 0
) -> int:
    """The line index where `needle` occurs once in `text`: exact first, then ignoring
    trailing whitespace. With `hint_index`, a match within `window` lines of it wins."""
    bodies = [_body(line) for line in _split(text)]
    for loose in (False, True):
        found = _find_all(bodies, needle, loose)
        if not found:
            continue
        if hint_index is not None:
            near = [i for i in found if abs(i - hint_index) <= window]
            if near:
                return min(near, key=lambda i: abs(i - hint_index))
        if len(found) == 1:
            return found[0]
        at = ", ".join(str(i + 1) for i in found[:8])
        raise EditError(
            f"{what}: the lines to replace occur {len(found)} times (at lines {at}); "
            "include more surrounding lines so that they match exactly once:\n"
            + _quote(needle)
        )
    raise EditError(
        f"{what}: these lines were not found in the file:\n"
        + _quote(needle)
        + "\n"
        + _closest(bodies, needle)
        + "\nThe lines must match the file exactly, whitespace included."
        + _indent_hint(bodies, needle)
    )


# --------------------------------------------------------------------------- applying


class _Workspace:
    """The evolving contents of the files the answer touches."""

    def __init__(self, read_file: ReadFile) -> None:
        self._read_file = read_file
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


def _apply_replace(ws: _Workspace, block: _Replace) -> None:
    what = f"SEARCH/REPLACE block {block.number} ({block.path})"
    path = _check_path(block.path, what)
    content = ws.get(path)
    search = block.search
    if not any(line.strip() for line in search):
        if content is None or not content.strip():
            ws.set(path, "".join(line + "\n" for line in block.replace))
            return
        raise EditError(
            f"{what}: the SEARCH part is empty but {path} already exists and is not empty; "
            "an empty SEARCH only creates a new file. To add lines, SEARCH for the lines next "
            "to where they go and repeat them in REPLACE"
        )
    if content is None:
        raise EditError(
            f"{what}: {path} does not exist. To create it, leave the SEARCH part empty; "
            "otherwise check the path (relative to the repository root)"
        )
    start = _locate(content, search, what)
    ws.set(path, _splice(content, start, len(search), block.replace))


def _strip_prefix(raw: str, prefix: str) -> str:
    return raw[len(prefix) :] if raw.startswith(prefix) else raw


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


def _parse_with_unidiff(text: str) -> list[_FileDiff]:
    """Read a diff with unidiff; raises whatever unidiff raises on malformed input."""
    from unidiff.patch import PatchSet

    files: list[_FileDiff] = []
    for patched in PatchSet(text):
        old, new = _file_paths(patched.source_file or "", patched.target_file or "")
        fd = _FileDiff(old, new)
        for hunk in patched:
            h = _Hunk(hunk.source_start)
            for line in hunk:
                if line.line_type in (" ", "-", "+"):
                    h.lines.append((line.line_type, _body(line.value)))
            fd.hunks.append(h)
        files.append(fd)
    return files


def _parse_tolerant(text: str) -> list[_FileDiff]:
    """Read a diff ignoring the hunk headers' line counts; a blank line inside a hunk is a
    blank context line, and trailing blank lines of a hunk are dropped."""
    lines = text.split("\n")
    files: list[_FileDiff] = []
    current: _FileDiff | None = None
    hunk: _Hunk | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            old, new = _file_paths(line[4:], lines[i + 1][4:])
            current = _FileDiff(old, new)
            files.append(current)
            hunk = None
            i += 2
            continue
        if line.startswith("@@"):
            if current is None:
                raise EditError("a hunk (@@ line) comes before any ---/+++ file header")
            match = _HUNK_HEADER_RE.match(line)
            hunk = _Hunk(int(match.group(1)) if match else None)
            current.hunks.append(hunk)
            i += 1
            continue
        if hunk is not None:
            if line[:1] in (" ", "-", "+"):
                hunk.lines.append((line[0], line[1:]))
            elif line == "":
                hunk.lines.append((" ", ""))
            elif line.startswith("\\"):
                pass
            else:
                hunk = None
        i += 1
    for fd in files:
        for h in fd.hunks:
            while h.lines and h.lines[-1] == (" ", ""):
                h.lines.pop()
    return files


def _parse_diff(text: str) -> list[_FileDiff]:
    """unidiff's reading when it succeeds and agrees with the tolerant one; else tolerant."""
    tolerant = _parse_tolerant(text)
    try:
        strict = _parse_with_unidiff(text)
    except Exception:
        return tolerant
    for fd in strict:
        for h in fd.hunks:
            while h.lines and h.lines[-1] == (" ", ""):
                h.lines.pop()
    return strict if strict == tolerant else tolerant


def _apply_diff(ws: _Workspace, block: _DiffBlock) -> bool:
    """Apply one fenced diff block; False when it holds no file diff at all."""
    what = f"diff block {block.number}"
    files = _parse_diff(block.text)
    if not files:
        return False
    for fd in files:
        if fd.new_path is None:
            name = fd.old_path or "?"
            raise EditError(f"{what}: deleting files ({name}) is not supported; edit it instead")
        path = _check_path(fd.new_path, what)
        if fd.old_path is not None and _check_path(fd.old_path, what) != path:
            raise EditError(
                f"{what}: renaming {fd.old_path} to {fd.new_path} is not supported; "
                "use the same path in the --- and +++ headers"
            )
        if not fd.hunks:
            raise EditError(f"{what} ({path}): no hunks (lines starting with @@) found")
        content = ws.get(path)
        if content is None and all(not h.old for h in fd.hunks):
            fd.old_path = None  # `--- a/new.py` with only `@@ -0,0` hunks: a creation too
        if fd.old_path is None:
            if content is not None and content.strip():
                raise EditError(
                    f"{what}: {path} already exists, but the diff creates it (--- /dev/null)"
                )
            created = [text for h in fd.hunks for text in h.new]
            ws.set(path, "".join(line + "\n" for line in created))
            continue
        if content is None:
            raise EditError(
                f"{what}: {path} does not exist. To create a file use `--- /dev/null`; "
                "otherwise check the path (relative to the repository root)"
            )
        offset = 0
        for number, h in enumerate(fd.hunks, start=1):
            hunk_what = f"{what}, hunk {number} ({path})"
            old, new = h.old, h.new
            if not old:
                # a pure insertion: "@@ -N,0" inserts after line N (git's convention)
                n_lines = len(_split(content))
                at = n_lines if h.old_start is None else min(h.old_start + offset, n_lines)
            else:
                stated = None if h.old_start is None else max(h.old_start - 1, 0) + offset
                at = _locate(content, old, hunk_what, stated, window=max(10, len(old)))
            content = _splice(content, at, len(old), new)
            offset += len(new) - len(old)
            ws.set(path, content)
    return True


def _apply_all(answer: str, read_file: ReadFile) -> _Workspace:
    """Apply every edit of the answer in order; EditError on the first that fails."""
    ws = _Workspace(read_file)
    edits = _scan(answer)
    applied = 0
    for edit in edits:
        if isinstance(edit, _Replace):
            _apply_replace(ws, edit)
            applied += 1
        elif _apply_diff(ws, edit):
            applied += 1
    if not applied:
        raise EditError(_NO_EDITS)
    return ws


# --------------------------------------------------------------------------- output


def _diff_lines(path: str, old: str | None, new: str) -> Iterator[str]:
    """git-style diff of one file, with "\\ No newline at end of file" markers."""
    yield f"diff --git a/{path} b/{path}\n"
    if old is None:
        yield "new file mode 100644\n"
        if not new:
            return
    a = _split(old or "")
    b = _split(new)
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


def parse_edits(answer: str, read_file: ReadFile) -> ParsedEdits:
    """Apply the answer's SEARCH/REPLACE blocks and ```diff blocks (in any mix, in order,
    each against the content the previous ones left) and return the resulting patch."""
    ws = _apply_all(answer, read_file)
    files = {
        path: new
        for path in ws.order
        if (new := ws.current[path]) is not None and new != ws.base[path]
    }
    if not files:
        raise EditError(
            "the edits change nothing: every REPLACE part is identical to its SEARCH part; "
            "make the change that fixes the problem"
        )
    return ParsedEdits(patch=make_patch(files, ws.base.get), files=files)


def partial_answer_is_hopeless(answer_so_far: str, read_file: ReadFile) -> str | None:
    """For streaming early-abort: the reason why the blocks already complete in a partial
    answer cannot apply (a SEARCH that does not match, a bad path), or None.

    Only the text up to the last complete `>>>>>>> REPLACE` line is looked at, so the cost
    is one parse of that prefix; callers should call it when a block has just completed.
    """
    lines = answer_so_far.replace("\r\n", "\n").split("\n")
    last = -1
    for k, line in enumerate(lines[:-1]):
        if _REPLACE_RE.match(line):
            last = k
    if last < 0:
        return None
    prefix = "\n".join(lines[: last + 1]) + "\n"
    try:
        edits = _scan(prefix)
        ws = _Workspace(read_file)
        for edit in edits:
            if isinstance(edit, _Replace):
                _apply_replace(ws, edit)
            else:
                _apply_diff(ws, edit)
    except EditError as err:
        return str(err)
    return None
