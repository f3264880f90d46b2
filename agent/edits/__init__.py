"""Turn a model's answer into one unified diff, whatever edit format the answer is in.

One class per format, each with the prompt text that teaches it beside its parser:
`SearchReplace` (agent/edits/search_replace.py), `UnifiedDiff` (udiff.py), `WholeFile`
(whole_file.py) and `Definitions` (definitions.py); agent/edits/formats.py is their registry,
whose order drives the parser, the system prompt and the stream patterns; FORMATS maps their
names to them. The order of trying them (docs/EDIT_FORMATS.md):

1. SEARCH/REPLACE blocks and fenced diffs, in any mix, applied in order, each against the
   content the previous ones left. When an answer holds any, they alone count.
2. Otherwise the fenced code blocks (agent/edits/code_blocks.py picks the one that counts):
   a block naming its file replaces the whole file, or the definitions it shows; a block
   without a path replaces the definitions it shows in the one file that has them (or the
   whole file when it shows all of it).

Pure: the only I/O is the callbacks passed in (`read_file`: a file's base content or None;
`list_files`: the repository's files). Every rejection is an `EditError` whose message is
written to be fed back to the model and whose `kind` names the reason. Scanning is linear in
the answer's length; text no file can hold (NUL, lone surrogates) is an EditError.
"""

from __future__ import annotations

import re

from ooda.agent.edits import formats
from ooda.agent.edits.base import (
    Context,
    EditError,
    ListFiles,
    NotEditable,
    ParsedEdits,
    ReadFile,
    Workspace,
    make_patch,
)
from ooda.agent.edits.code_blocks import apply_best
from ooda.agent.edits.formats import ExplicitFormat
from ooda.agent.edits.scan import Fence, check_text, fences
from ooda.agent.edits.udiff import UnifiedDiff
from ooda.agent.edits.views import FileView, Views

__all__ = [
    "FORMATS",
    "ORDER",
    "EditError",
    "FileView",
    "Views",
    "ListFiles",
    "NotEditable",
    "ParsedEdits",
    "ReadFile",
    "make_patch",
    "parse_edits",
    "partial_answer_is_hopeless",
    "prose_before_edits",
]

FORMATS = formats.formats()
"""Every accepted edit format, by the name recorded as `edit_format` (agent/edits/formats.py)."""
ORDER: tuple[str, ...] = tuple(FORMATS)
"""The order of trying: explicit edits (SEARCH/REPLACE and diffs, mixed in answer order)
first; fenced code blocks (whole file, then definitions) only when there are none."""

Edit = tuple[ExplicitFormat, object]
"""One explicit edit of an answer and the format that reads it."""


def _explicit(lines: list[str], blocks: list[Fence]) -> list[Edit]:
    """Every explicit edit of the answer, in order (one pass; at each line the formats of
    formats.EXPLICIT are asked in their order)."""
    readers = [(f, f.reader(lines, blocks)) for f in formats.EXPLICIT]
    found: list[Edit] = []
    i = 0
    while i < len(lines):
        for fmt, reader in readers:
            got = reader.read(i)
            if got is not None:
                found.append((fmt, got[0]))
                i = got[1]
                break
        else:
            i += 1
    return found


def _apply_explicit(edits: list[Edit], ws: Workspace) -> str | None:
    """Apply the explicit edits in order; the format name, or None when none was an edit."""
    used: list[str] = []
    for fmt, edit in edits:
        if fmt.apply_block(ws, edit) and fmt.name not in used:
            used.append(fmt.name)
    return "+".join(used) if used else None


def parse_edits(
    answer: str,
    read_file: ReadFile,
    list_files: ListFiles | None = None,
    views: Views | None = None,
) -> ParsedEdits:
    """Apply the answer's edits (in the first format of ORDER that it uses) to the files
    `read_file` gives and return the resulting patch; `list_files` lets a code block
    without a path find the one file that defines its functions; `views` says what the
    model saw of the files it was shown (agent/edits/views.py), None: every file whole."""
    lines = check_text(answer).split("\n")
    blocks = fences(lines)
    ctx = Context(read_file, list_files, views)
    ws = Workspace(read_file, views)
    name = _apply_explicit(_explicit(lines, blocks), ws)
    if name is None:
        code = [f for f in blocks if not UnifiedDiff.is_diff(f)]
        ws, name = apply_best(lines, code, ctx)
    files = ws.changed()
    if not files:
        raise EditError(
            "the edits change nothing: every REPLACE part is identical to its SEARCH part; "
            "make the change that fixes the problem", "no_op")
    return ParsedEdits(patch=make_patch(files, ws.base.get), files=files, edit_format=name)


def partial_answer_is_hopeless(
    answer_so_far: str, read_file: ReadFile, views: Views | None = None
) -> str | None:
    """For streaming early-abort: the reason why the blocks already complete in a partial
    answer cannot apply (a SEARCH that does not match, a bad path), or None.

    Only the text up to the last line that completes an edit (`>>>>>>> REPLACE`:
    formats.edit_completed) is looked at, so the cost is one parse of that prefix; callers
    should call it when a block has just completed.
    """
    try:
        lines = check_text(answer_so_far).split("\n")
    except EditError as err:
        return str(err)
    completed = formats.edit_completed()
    last = -1
    for k, line in enumerate(lines[:-1]):
        if completed is not None and completed.match(line):
            last = k
    if last < 0:
        return None
    prefix = lines[: last + 1] + [""]
    try:
        _apply_explicit(_explicit(prefix, fences(prefix)), Workspace(read_file, views))
    except EditError as err:
        return str(err)
    return None


_THINKING = re.compile(r"\A\s*<think>.*?(?:</think>|\Z)", re.DOTALL)


def prose_before_edits(answer_so_far: str) -> str | None:
    """The prose an answer has streamed before any edit begins (a leading <think> block left
    out), or None once an edit has begun. For stopping an answer that talks and never edits:
    callers should look at completed lines only, as a fence's first characters may still be
    arriving."""
    text = _THINKING.sub("", answer_so_far, count=1)
    if formats.edit_begun().search(text):
        return None
    return text
