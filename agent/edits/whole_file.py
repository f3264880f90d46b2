"""Whole file: a fenced block that holds a file's complete new content.

The block names its file by a path line right before it (`path/to/mod.py`, `**mod.py**`,
`# File: mod.py`), by a path on its fence line (```python mod.py), or by a path mentioned
in the sentence right before it ("Here is the corrected `mod.py`:"). Without a path it counts
only where that is unambiguous: ooda.agent.edits.code_blocks decides (the block's definitions
exist in exactly one file, or the repository has one non-test source file).
"""

from __future__ import annotations

from typing import ClassVar

from ooda.agent.edits.base import EditError, Workspace, eol, split_lines


class WholeFile:
    """A fenced block replacing one file's whole content."""

    name: ClassVar[str] = "whole_file"
    prompt: ClassVar[str] = (
        "For a small file, its whole new content in a fenced block, with the file's path "
        "alone on the line before the block, is also accepted."
    )
    begins: ClassVar[str] = r"```|~~~"

    @staticmethod
    def content(body: list[str], old: str | None) -> str:
        """The file's new text: the block's lines in the old file's line endings, with a
        final newline."""
        ending = eol(split_lines(old)) if old else "\n"
        lines = list(body)
        while lines and not lines[-1].strip():
            lines.pop()
        return "".join(line + ending for line in lines)

    @classmethod
    def apply(cls, ws: Workspace, path: str, body: list[str]) -> None:
        """Set the file to the block; for a file the model saw only in part, apply the block
        as far as the model saw (agent/edits/views.py); a file it was not shown at all is an
        EditError."""
        old = ws.get(path)
        if ws.views is not None and old is not None:
            view = ws.views.get(path)
            if view is None:
                raise EditError(
                    f"{path} was not shown to you, so a whole new content for it would replace "
                    "code you have not read; change it with SEARCH/REPLACE blocks of lines you "
                    "were shown, or leave it", "unseen_file")
            body = view.merge_whole(list(body))
        ws.set(path, cls.content(body, old))
