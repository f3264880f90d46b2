"""Reading an answer's layout in one linear pass: its lines, its fenced blocks, path lines.

Every check here is a string operation or an anchored regex without nested or adjacent
unbounded repeats, so scanning an answer of n characters costs O(n) whatever it holds
(an earlier fence regex backtracked cubically on a fence line followed by many spaces).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ooda.agent.edits.base import EditError

SEARCH_RE = re.compile(r"[ \t]*<{5,9} ?SEARCH\b")
DIVIDER_RE = re.compile(r"[ \t]*={5,9}[ \t]*$")
REPLACE_RE = re.compile(r"[ \t]*>{5,9} ?REPLACE\b")
_PATH_PREFIX_RE = re.compile(r"(?:#+[ \t]*|(?:file|path|filename)[ \t]*:[ \t]*)", re.IGNORECASE)
_PATH_WORD_RE = re.compile(r"[\w./\\-]+\.[A-Za-z0-9]{1,8}")
MAX_ANSWER_CHARS = 2_000_000
"""Longer answers are refused outright: no model answer to a bug fix is this long."""


def check_text(answer: str) -> str:
    """The answer with "\\r\\n" turned into "\\n"; EditError for text no file can hold:
    NUL characters, lone surrogates (not encodable as UTF-8), absurd length."""
    if len(answer) > MAX_ANSWER_CHARS:
        raise EditError(
            f"the answer is {len(answer)} characters long; answer with edits, not whole "
            "repositories", "invalid_text")
    if "\x00" in answer:
        raise EditError("the answer contains NUL characters; answer with plain text",
                        "invalid_text")
    try:
        answer.encode("utf-8")
    except UnicodeEncodeError as err:
        raise EditError(
            f"the answer is not valid text (a lone surrogate {answer[err.start]!r} at "
            f"character {err.start}); answer with plain UTF-8 text", "invalid_text") from None
    return answer.replace("\r\n", "\n").replace("\r", "\n")


def fence_info(line: str) -> tuple[str, str] | None:
    """(fence characters, info string) when `line` is a code fence line, else None."""
    text = line.strip()
    if not text or text[0] not in "`~":
        return None
    char = text[0]
    n = len(text) - len(text.lstrip(char))
    if n < 3:
        return None
    info = text[n:].strip()
    if char == "`" and "`" in info:
        return None
    return text[:n], info


@dataclass(frozen=True)
class Fence:
    """One fenced block: the lines of its opening and closing fences and its body."""

    start: int
    end: int
    """Index of the closing fence line (len(lines) when the block is not closed)."""
    info: str
    body: list[str]

    @property
    def lang(self) -> str:
        return self.info.split()[0].lower() if self.info else ""


def fences(lines: list[str]) -> list[Fence]:
    """Every top-level fenced block, in order, in one pass (markdown's rule: a block ends at
    a fence of the same character, at least as long, with no info string)."""
    found: list[Fence] = []
    open_at = -1
    open_chars = ""
    info = ""
    for i, line in enumerate(lines):
        fence = fence_info(line)
        if fence is None:
            continue
        chars, text = fence
        if open_at < 0:
            open_at, open_chars, info = i, chars, text
        elif not text and chars[0] == open_chars[0] and len(chars) >= len(open_chars):
            found.append(Fence(open_at, i, info, lines[open_at + 1 : i]))
            open_at = -1
    if open_at >= 0:
        found.append(Fence(open_at, len(lines), info, lines[open_at + 1 :]))
    return found


def clean_path(line: str) -> str | None:
    """The path written on `line`, or None when the line does not look like a lone path."""
    text = line.strip()
    match = _PATH_PREFIX_RE.match(text)
    if match:
        text = text[match.end() :].strip()
    text = text.strip("*_`'\"").strip()
    text = text.rstrip(":").strip().strip("`")
    if not text or len(text) > 300 or any(ch.isspace() for ch in text):
        return None
    if any(ch in text for ch in "<>|=*?\"'`()[]{},;"):
        return None
    return text


def path_from_fence(info: str) -> str | None:
    """A path written on a fence line, as in ```python src/mod.py or ```src/mod.py."""
    for word in info.split():
        if "/" in word or ("." in word.strip(".")):
            path = clean_path(word)
            if path is not None:
                return path
    return None


def paths_mentioned(text: str) -> list[str]:
    """Words of `text` that look like file paths (`name.ext`, `dir/name.ext`), in order."""
    found = []
    for word in text.split():
        word = word.strip("`*_'\"()[]{},;:!?").rstrip(".")
        word = word.removeprefix("./")
        if len(word) <= 300 and _PATH_WORD_RE.fullmatch(word):
            found.append(word)
    return found
