"""The lines an answer writes into files, read as the answer streams, in every edit format.

A stream check that judges what an answer adds (agent/core/checks/security.py) must know, for
each completed line, whether it is a line the answer adds to a file, one it quotes from the
file, or prose: the REPLACE part of a SEARCH/REPLACE block adds, its SEARCH part quotes; a
diff's `+` lines add, its `-` lines quote and its context lines keep; every line of a fenced
code block (a whole file, or definitions) adds; prose, and a leading <think> block, add
nothing. `AnswerLines` reads the
answer once, line by line, as it grows: each call looks only at the lines completed since the
last one, with the same markers the parsers accept (agent/edits/scan.py), so its cost is linear
in the answer's length.

It is a reader of layout, not a parser: it never decides whether an edit applies (the parsers
do, once the answer is complete) and keeps no more than a few lines of look-behind.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from ooda.agent.edits.scan import (
    DIVIDER_RE,
    REPLACE_RE,
    SEARCH_RE,
    clean_path,
    fence_info,
    path_from_fence,
    paths_mentioned,
)
from ooda.agent.edits.search_replace import SearchReplace

LineKind = Literal["added", "quoted", "kept"]
"""added: the answer writes it (REPLACE part, `+` line, code block); quoted: it names a line of
the file being replaced (SEARCH part, `-` line); kept: a diff's context line."""

PartKind = Literal["replace", "diff", "code"]
"""What the line belongs to: a SEARCH/REPLACE block, a diff, a fenced code block."""

_HUNK_RE = re.compile(r"@@ -(\d+)")
DIFF_LANGS = frozenset({"diff", "patch", "udiff", "git"})
"""Fence languages that mark a diff (as agent/edits/udiff.py reads them)."""
_LOOK_BEHIND = 5


@dataclass(frozen=True)
class AnswerLine:
    """One completed line of an edit in the answer."""

    part: int
    """Which edit it belongs to, counted from 1 (a block, a diff's file, a code block); lines
    of one part are contiguous in the file they change (a diff's hunks start new parts)."""
    part_kind: PartKind
    kind: LineKind
    text: str
    """The line as the file holds it (a diff's one-character prefix removed)."""
    paths: tuple[str, ...]
    """The file(s) it goes to, surest first: the path the edit names (SEARCH/REPLACE, diff),
    or for a code block the paths its fence line, the line before it or its sentence name;
    empty when the answer names none."""
    lang: str
    """The fence's language ("" when none or outside a fence)."""
    end: int
    """Offset in the answer just past this line's newline."""
    at: int | None = None
    """For a diff's line: its index (from 0) in the file before the change, as the hunk header
    counts (an added line: the index of the line it goes before); None elsewhere."""


class AnswerLines:
    """Reads a growing answer: `feed(text)` returns the lines of edits completed since the
    previous call (the text only grows; an unfinished last line waits for its newline)."""

    def __init__(self) -> None:
        self._done = 0
        self._recent: list[str] = []
        self._part = 0
        self._mode: Literal["prose", "fence", "search", "replace"] = "prose"
        self._outer: Literal["prose", "fence"] = "prose"
        self._fence_chars = ""
        self._fence_lang = ""
        self._fence_kind: Literal["pending", "diff", "code", "blocks"] = "pending"
        self._fence_paths: tuple[str, ...] = ()
        self._pending: list[tuple[str, int]] = []
        self._block_path: str | None = None
        self._diff_path: str | None = None
        self._old_line = 0
        self._thinking: bool | None = None
        """None until the first non-blank line: True inside a leading <think> block."""

    def feed(self, text: str) -> list[AnswerLine]:
        end = text.rfind("\n") + 1
        found: list[AnswerLine] = []
        pos = self._done
        while pos < end:
            nl = text.index("\n", pos)
            line = text[pos:nl]
            if line.endswith("\r"):
                line = line[:-1]
            self._line(line, nl + 1, found)
            pos = nl + 1
        self._done = max(self._done, end)
        return found

    # ------------------------------------------------------------------ one line

    def _line(self, line: str, end: int, out: list[AnswerLine]) -> None:
        if self._thinking is not False:
            line = self._think(line)
            if self._thinking:
                return
        mode = self._mode
        if mode == "search":
            self._in_search(line, end, out)
        elif mode == "replace":
            self._in_replace(line, end, out)
        elif SEARCH_RE.match(line):
            self._start_block(line)
        elif mode == "fence":
            self._in_fence(line, end, out)
        else:
            self._in_prose(line)
        self._recent.append(line)
        if len(self._recent) > _LOOK_BEHIND:
            del self._recent[0]

    def _think(self, line: str) -> str:
        """A reasoning model's leading <think> block is not the answer (as
        agent/edits.prose_before_edits reads it): its lines add nothing. The rest of the line
        that closes it is read as the answer's."""
        if self._thinking is None:
            if not line.strip():
                return line
            self._thinking = line.lstrip().startswith("<think>")
            if not self._thinking:
                return line
        close = line.find("</think>")
        if close < 0:
            return line
        self._thinking = False
        return line[close + len("</think>"):]

    def _start_block(self, line: str) -> None:
        lines = [*self._recent, line]
        path = SearchReplace.find_path(lines, len(lines) - 1) or self._block_path
        self._block_path = path
        self._outer = "fence" if self._mode == "fence" else "prose"
        if self._outer == "fence":
            self._fence_kind = "blocks"
            self._pending = []
        self._part += 1
        self._mode = "search"

    def _emit(self, out: list[AnswerLine], part_kind: PartKind, kind: LineKind, text: str,
              paths: tuple[str, ...], end: int, at: int | None = None) -> None:
        lang = self._fence_lang if self._outer == "fence" or self._mode == "fence" else ""
        out.append(AnswerLine(self._part, part_kind, kind, text, paths, lang, end, at))

    def _block_paths(self) -> tuple[str, ...]:
        return (self._block_path,) if self._block_path else ()

    def _in_search(self, line: str, end: int, out: list[AnswerLine]) -> None:
        if DIVIDER_RE.match(line):
            self._mode = "replace"
        elif REPLACE_RE.match(line):  # malformed: no divider
            self._mode = self._outer
        else:
            self._emit(out, "replace", "quoted", line, self._block_paths(), end)

    def _in_replace(self, line: str, end: int, out: list[AnswerLine]) -> None:
        if REPLACE_RE.match(line):
            self._mode = self._outer
        elif SEARCH_RE.match(line):  # malformed: the next block began
            self._mode = self._outer
            self._start_block(line)
        else:
            self._emit(out, "replace", "added", line, self._block_paths(), end)

    def _in_prose(self, line: str) -> None:
        fence = fence_info(line)
        if fence is None:
            return
        chars, info = fence
        self._mode = "fence"
        self._fence_chars = chars
        self._fence_lang = info.split()[0].lower() if info else ""
        self._fence_kind = "diff" if self._fence_lang in DIFF_LANGS else "pending"
        self._fence_paths = self._paths_before(info)
        self._pending = []
        self._diff_path = None
        self._part += 1

    def _paths_before(self, info: str) -> tuple[str, ...]:
        """The paths a code block may be for: on its fence line, alone on the line before,
        mentioned in the sentence before it (as agent/edits/code_blocks.py looks for them)."""
        found: list[str] = []
        on_fence = path_from_fence(info)
        if on_fence:
            found.append(on_fence)
        before = next((ln for ln in reversed(self._recent) if ln.strip()), "")
        if before and fence_info(before) is None:
            lone = clean_path(before)
            if lone is not None and "." in lone.strip("."):
                found.append(lone)
            else:
                found += paths_mentioned(before)
        return tuple(dict.fromkeys(p.removeprefix("./") for p in found))

    def _closes(self, line: str) -> bool:
        fence = fence_info(line)
        return (fence is not None and not fence[1] and fence[0][0] == self._fence_chars[0]
                and len(fence[0]) >= len(self._fence_chars))

    def _in_fence(self, line: str, end: int, out: list[AnswerLine]) -> None:
        if self._closes(line):
            self._flush_pending(out)
            self._mode = "prose"
            self._fence_lang = ""
            return
        kind = self._fence_kind
        if kind == "pending":
            self._decide(line, end, out)
        elif kind == "diff":
            self._in_diff(line, end, out)
        elif kind == "code":
            self._emit(out, "code", "added", line, self._fence_paths, end)

    def _decide(self, line: str, end: int, out: list[AnswerLine]) -> None:
        """A fenced block's kind from its first lines: a diff starts with `diff --git` or
        `--- ` then `+++ `; anything else is code (held back while it could still be a
        diff's first header line)."""
        self._pending.append((line, end))
        first = next((ln for ln, _ in self._pending if ln.strip()), None)
        if first is None:
            return
        if first.startswith("diff --git "):
            self._fence_kind = "diff"
        elif first.startswith("--- "):
            if len([ln for ln, _ in self._pending if ln.strip()]) < 2:
                return
            after = [ln for ln, _ in self._pending if ln.strip()][1]
            self._fence_kind = "diff" if after.startswith("+++ ") else "code"
        else:
            self._fence_kind = "code"
        self._flush_pending(out)

    def _flush_pending(self, out: list[AnswerLine]) -> None:
        held, self._pending = self._pending, []
        if self._fence_kind == "pending":
            self._fence_kind = "code"
        for line, end in held:
            if self._fence_kind == "diff":
                self._in_diff(line, end, out)
            elif self._fence_kind == "code":
                self._emit(out, "code", "added", line, self._fence_paths, end)

    def _in_diff(self, line: str, end: int, out: list[AnswerLine]) -> None:
        if line.startswith("+++ "):
            path = line[4:].strip().split("\t")[0]
            self._diff_path = None if path == "/dev/null" else path.removeprefix("b/")
            self._part += 1
        elif line.startswith(("--- ", "diff --git ", "index ", "\\ ")):
            return
        elif line.startswith("@@"):
            self._part += 1
            header = _HUNK_RE.match(line)
            self._old_line = max(int(header.group(1)) - 1, 0) if header else -1
        else:
            paths = (self._diff_path,) if self._diff_path else self._fence_paths
            at = self._old_line if self._old_line >= 0 else None
            if line.startswith("+"):
                self._emit(out, "diff", "added", line[1:], paths, end, at)
                return
            kind: LineKind = "quoted" if line.startswith("-") else "kept"
            self._emit(out, "diff", kind, line[1:], paths, end, at)
            if self._old_line >= 0:
                self._old_line += 1
