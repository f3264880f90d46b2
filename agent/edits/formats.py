"""The edit formats, in the order an answer is read: `EXPLICIT` then `CODE_BLOCKS`, one line per
format. The order drives everything that depends on the formats: the parser (the explicit
formats are looked for at each line in this order), the system prompt (the `asked` formats'
teaching text, in this order: agent/core/prompts.py) and the stream patterns (a line that begins
an edit ends the prose check; a line that completes one triggers the re-check of a streaming
answer: agent/core/checks/).

An explicit format is one module with a class like `ExplicitFormat`; adding one is adding its
file and its line in `EXPLICIT`. The code-block formats (a fenced block that is a whole file or
whole definitions) are read only when an answer holds no explicit edit, by
agent/edits/code_blocks.py, which picks the block that counts.
"""

from __future__ import annotations

import re
from typing import Protocol

from ooda.agent.edits.base import Workspace
from ooda.agent.edits.definitions import Definitions
from ooda.agent.edits.scan import Fence
from ooda.agent.edits.search_replace import SearchReplace
from ooda.agent.edits.udiff import UnifiedDiff
from ooda.agent.edits.whole_file import WholeFile


class BlockReader(Protocol):
    """Finds one format's edits in one answer, line by line (it may count and remember, e.g.
    the last path named)."""

    def read(self, index: int) -> tuple[object, int] | None:
        """The edit that begins at line `index` and the index of the line after it; None when
        no edit of this format begins there. EditError for an edit begun but unreadable."""
        ...


class ExplicitFormat(Protocol):
    """A format whose edits are located in the answer's lines and applied in answer order."""

    @property
    def name(self) -> str:
        """The name recorded as `edit_format`."""
        ...

    @property
    def prompt(self) -> str:
        """The text that teaches it (in the system prompt when `asked`)."""
        ...

    @property
    def asked(self) -> bool:
        """The system prompt teaches it."""
        ...

    @property
    def begins(self) -> str:
        """A regular expression of what a line that begins one of its edits starts with
        (after indentation)."""
        ...

    @property
    def completes(self) -> str | None:
        """The same, of a line that completes an edit (a streaming answer is re-checked
        then); None: its edits are not checked while streaming."""
        ...

    def reader(self, lines: list[str], fences: list[Fence]) -> BlockReader:
        """A reader of this format's edits in an answer's `lines` (its fenced blocks given)."""
        ...

    def apply_block(self, ws: Workspace, block: object) -> bool:
        """Apply one edit its reader found; False when it turned out to be no edit at all."""
        ...


class CodeBlockFormat(Protocol):
    """A fenced code block read as one format (code_blocks.py decides which)."""

    @property
    def name(self) -> str: ...

    @property
    def prompt(self) -> str: ...

    @property
    def begins(self) -> str: ...


EXPLICIT: tuple[ExplicitFormat, ...] = (
    SearchReplace(),  # SEARCH/REPLACE blocks (the format the prompt asks for)
    UnifiedDiff(),  # unified diffs in a fence
)
"""The formats whose edits are located in the answer, in the order they are looked for."""
CODE_BLOCKS: tuple[CodeBlockFormat, ...] = (WholeFile(), Definitions())
"""Fenced code blocks, read only when an answer holds no explicit edit (code_blocks.py)."""


def formats() -> dict[str, ExplicitFormat | CodeBlockFormat]:
    """Every accepted format by name, in the order of trying."""
    return {f.name: f for f in (*EXPLICIT, *CODE_BLOCKS)}


def teaching() -> str:
    """The system prompt's text on the formats: what the asked ones teach, in order."""
    return "\n".join(f.prompt for f in EXPLICIT if f.asked)


def edit_begun() -> re.Pattern[str]:
    """A line that begins an edit in any format (multiline search)."""
    every = [*CODE_BLOCKS, *EXPLICIT]
    return re.compile(r"^[ \t]*(?:" + "|".join(f.begins for f in every) + ")", re.MULTILINE)


def edit_completed() -> re.Pattern[str] | None:
    """A line that completes an edit that can be checked while streaming (`match` at a line's
    start); None when no format has one."""
    ends = [f.completes for f in EXPLICIT if f.completes is not None]
    return re.compile(r"[ \t]*(?:" + "|".join(ends) + ")") if ends else None
