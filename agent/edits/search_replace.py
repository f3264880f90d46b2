"""SEARCH/REPLACE blocks: the format the prompt asks for (cheapest for a model to write).

A block is the file's path alone on a line, then `<<<<<<< SEARCH`, the lines to find,
`=======`, the lines that replace them, `>>>>>>> REPLACE`. The SEARCH lines are found
exactly first, then ignoring trailing whitespace, then ignoring indentation, runs of spaces
and trailing comments (the REPLACE lines then move to the file's indentation); a pass that
finds them twice is an error, never a guess. When nothing matches, the reason quotes the
closest lines of the file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from ooda.agent.edits.base import EditError, Workspace, check_path, replace_lines
from ooda.agent.edits.scan import (
    DIVIDER_RE,
    REPLACE_RE,
    SEARCH_RE,
    Fence,
    clean_path,
    fence_info,
    path_from_fence,
)


@dataclass
class ReplaceBlock:
    """One SEARCH/REPLACE block."""

    number: int
    path: str
    search: list[str]
    replace: list[str]


class SearchReplace:
    """SEARCH/REPLACE blocks, each against the content the previous ones left."""

    name: ClassVar[str] = "search_replace"
    prompt: ClassVar[str] = """\
Answer with edits only, as SEARCH/REPLACE blocks. Each block is the file's path (relative to
the repository root) alone on a line, then:

<<<<<<< SEARCH
lines copied exactly from the current file
=======
the lines that replace them
>>>>>>> REPLACE

Copy the SEARCH lines exactly, including indentation, and keep them short but unique.
An empty SEARCH part on a new path creates that file."""
    asked: ClassVar[bool] = True
    begins: ClassVar[str] = r"<{5,9} ?SEARCH"
    completes: ClassVar[str | None] = r">{5,9} ?REPLACE\b"

    def reader(self, lines: list[str], fences: list[Fence]) -> _Reader:
        return _Reader(lines)

    def apply_block(self, ws: Workspace, block: object) -> bool:
        assert isinstance(block, ReplaceBlock)
        self.apply(ws, block)
        return True

    @staticmethod
    def is_start(line: str) -> bool:
        """True when `line` opens a block."""
        return SEARCH_RE.match(line) is not None

    @staticmethod
    def find_path(lines: list[str], index: int) -> str | None:
        """The path for the SEARCH marker at `index`: the nearest non-blank line above it,
        looking past one code fence line (whose info string may itself name the path)."""
        j = index - 1
        seen_fence = False
        while j >= 0 and index - j <= 4:
            line = lines[j]
            if not line.strip():
                j -= 1
                continue
            fence = fence_info(line)
            if fence is not None and not seen_fence:
                seen_fence = True
                from_fence = path_from_fence(fence[1])
                if from_fence is not None:
                    return from_fence
                j -= 1
                continue
            if SEARCH_RE.match(line) or REPLACE_RE.match(line) or DIVIDER_RE.match(line):
                return None
            return clean_path(line)
        return None

    @classmethod
    def read(
        cls, lines: list[str], start: int, number: int, last_path: str | None
    ) -> tuple[ReplaceBlock, int]:
        """The block whose SEARCH marker is at `start`, and the index after it."""
        path = cls.find_path(lines, start) or last_path
        if path is None:
            raise EditError(
                f"SEARCH/REPLACE block {number}: no file path found; put the path (relative to "
                "the repository root) alone on the line before `<<<<<<< SEARCH`", "no_path")
        where = f"SEARCH/REPLACE block {number} ({path})"
        i = start + 1
        search: list[str] = []
        while i < len(lines) and not DIVIDER_RE.match(lines[i]):
            if SEARCH_RE.match(lines[i]) or REPLACE_RE.match(lines[i]):
                raise EditError(f"{where}: missing `=======` between SEARCH and REPLACE",
                                "unterminated")
            search.append(lines[i])
            i += 1
        if i >= len(lines):
            raise EditError(f"{where}: missing `=======` (the answer may have been cut off)",
                            "unterminated")
        i += 1
        replace: list[str] = []
        while i < len(lines) and not REPLACE_RE.match(lines[i]):
            if SEARCH_RE.match(lines[i]):
                raise EditError(f"{where}: missing `>>>>>>> REPLACE` before the next block",
                                "unterminated")
            replace.append(lines[i])
            i += 1
        if i >= len(lines):
            raise EditError(
                f"{where}: missing `>>>>>>> REPLACE` (the answer may have been cut off)",
                "unterminated")
        return ReplaceBlock(number, path, search, replace), i + 1

    @staticmethod
    def apply(ws: Workspace, block: ReplaceBlock) -> None:
        """Apply one block to the workspace; EditError saying why when it cannot."""
        what = f"SEARCH/REPLACE block {block.number} ({block.path})"
        path = check_path(block.path, what)
        content = ws.get(path)
        if not any(line.strip() for line in block.search):
            if content is None or not content.strip():
                ws.set(path, "".join(line + "\n" for line in block.replace))
                return
            raise EditError(
                f"{what}: the SEARCH part is empty but {path} already exists and is not empty; "
                "an empty SEARCH only creates a new file. To add lines, SEARCH for the lines "
                "next to where they go and repeat them in REPLACE", "exists")
        if content is None:
            raise EditError(
                f"{what}: {path} does not exist. To create it, leave the SEARCH part empty; "
                "otherwise check the path (relative to the repository root)", "missing_file")
        search, replace = ws.expand(path, block.search), ws.expand(path, block.replace)
        ws.set(path, replace_lines(content, search, replace, what))


class _Reader:
    """The blocks of one answer, numbered; a block without a path line takes the last one's."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.count = 0
        self.last_path: str | None = None

    def read(self, index: int) -> tuple[ReplaceBlock, int] | None:
        if not SearchReplace.is_start(self.lines[index]):
            return None
        self.count += 1
        block, after = SearchReplace.read(self.lines, index, self.count, self.last_path)
        self.last_path = block.path
        return block, after
