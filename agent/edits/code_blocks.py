"""Which fenced code block of an answer counts, and as which format (whole file or
definitions), when the answer has no SEARCH/REPLACE block and no diff.

Chat models often quote the buggy code first and give the corrected version after it, or
the fix first and a usage example after. The candidates are tried in this order: blocks
introduced as the fix ("Here is the corrected function:"), then the others, each group
from the last block back to the first, and blocks introduced as the current code ("The
original code:") last. The first block that parses, applies and changes something wins;
a block that only quotes the current code changes nothing and is passed over.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from ooda.agent.edits.base import Context, EditError, Workspace, check_path
from ooda.agent.edits.definitions import Definitions, PyBlock, is_test_path
from ooda.agent.edits.scan import Fence, clean_path, fence_info, path_from_fence, paths_mentioned
from ooda.agent.edits.whole_file import WholeFile

_FIX_RE = re.compile(
    r"\b(?:fix|fixed|fixes|corrected|correct version|updated|revised|should be|should read|"
    r"change it to|replace it with|solution|new version|final|instead|actually)\b", re.IGNORECASE)
_QUOTE_RE = re.compile(
    r"\b(?:buggy|original|current|currently|existing|broken|wrong|incorrect|before|"
    r"problem is|bug is)\b", re.IGNORECASE)
_PY_LANGS = {"", "python", "py", "python3", "py3"}
_MAX_INTRO_LINES = 3


@dataclass
class Candidate:
    """A fenced block with what the text around it says about it."""

    number: int
    fence: Fence
    path: str | None
    """The path the block names (path line, fence line or the sentence before it)."""
    intro: str
    """The last few non-blank lines before the block."""

    @property
    def rank(self) -> int:
        """0: introduced as the fix; 1: neutral; 2: introduced as the current code."""
        last = self.intro.split("\n")[-1] if self.intro else ""
        if _FIX_RE.search(last):
            return 0
        if _QUOTE_RE.search(last):
            return 2
        return 1


def candidates(lines: list[str], blocks: list[Fence], ctx: Context) -> list[Candidate]:
    """The blocks worth trying, in the order they are tried."""
    found: list[Candidate] = []
    prev_end = -1
    for number, fence in enumerate(blocks, start=1):
        before = [ln for ln in lines[prev_end + 1 : fence.start] if ln.strip()]
        before = before[-_MAX_INTRO_LINES:]
        prev_end = fence.end
        intro = "\n".join(ln.strip() for ln in before)
        found.append(Candidate(number, fence, _path_for(fence, before, ctx), intro))
    order = sorted(found, key=lambda c: (c.rank, -c.number))
    return order


def _path_for(fence: Fence, before: list[str], ctx: Context) -> str | None:
    """The path a block names: on its fence line, alone on the line before it, or mentioned
    (as an existing file) in the text right before it."""
    from_fence = path_from_fence(fence.info)
    if from_fence is not None and _plausible(from_fence, ctx) and _fits(fence, from_fence):
        return from_fence
    if before:
        line = before[-1]
        if fence_info(line) is None:
            lone = clean_path(line)
            if lone is not None and _plausible(lone, ctx) and _fits(fence, lone):
                return lone
    mentioned: list[str] = []
    for line in before[-2:]:
        for word in paths_mentioned(line):
            path = _safe(word)
            if path is not None and path not in mentioned and _fits(fence, path) and (
                    ctx.read_file(path) is not None):
                mentioned.append(path)
    return mentioned[-1] if mentioned else None


def _safe(path: str) -> str | None:
    """The normalised repo-relative path, or None when it is absolute or leaves the
    repository (such a path is never handed to the reader)."""
    try:
        return check_path(path, "path")
    except EditError:
        return None


_LANG_SUFFIXES = {
    "python": {".py", ".pyi"}, "py": {".py", ".pyi"}, "python3": {".py", ".pyi"},
    "py3": {".py", ".pyi"}, "markdown": {".md"}, "md": {".md"}, "yaml": {".yaml", ".yml"},
    "yml": {".yaml", ".yml"}, "toml": {".toml"}, "ini": {".ini", ".cfg"}, "cfg": {".cfg"},
    "json": {".json"}, "text": {".txt"}, "txt": {".txt"}, "rst": {".rst"},
    "bash": {".sh"}, "sh": {".sh"}, "shell": {".sh"},
}


def _fits(fence: Fence, path: str) -> bool:
    """True when the block's language suits the file (a ```bash block after a sentence
    naming README.md is a command to run, not the new README)."""
    lang = fence.lang
    if not lang or (path_from_fence(fence.info) is not None and lang == fence.info.strip()):
        return True  # no language given (or the fence line is the path itself)
    suffix = PurePosixPath(path).suffix.lower()
    return suffix in _LANG_SUFFIXES.get(lang, {"." + lang})


_NEW_FILE_SUFFIXES = frozenset({
    ".py", ".pyi", ".md", ".rst", ".txt", ".toml", ".cfg", ".ini", ".json", ".yaml", ".yml",
    ".sh", ".c", ".h", ".js", ".ts", ".html", ".css", ".sql", ".csv", ".xml",
})


def _plausible(path: str, ctx: Context) -> bool:
    """True for an existing file, or a new one with a usual suffix (so "e.g." or
    "python3.11" on a fence line is not taken for a file to create)."""
    safe = _safe(path)
    if safe is None:
        return True  # named, but unusable: _apply rejects it with the reason (bad_path)
    if ctx.read_file(safe) is not None:
        return True
    return PurePosixPath(path).suffix.lower() in _NEW_FILE_SUFFIXES and bool(
        PurePosixPath(path).stem)


def apply_best(lines: list[str], blocks: list[Fence], ctx: Context) -> tuple[Workspace, str]:
    """The workspace after the block that counts, and its format name; EditError (the most
    preferred block's reason) when no block applies and changes something."""
    first_error: EditError | None = None
    no_op = False
    for cand in candidates(lines, blocks, ctx):
        ws = Workspace(ctx.read_file, ctx.views)
        try:
            name = _apply(cand, ws, ctx)
        except EditError as err:
            first_error = first_error or err
            continue
        if name is None:
            continue
        if ws.changed():
            return ws, name
        no_op = True
    if first_error is not None:
        raise first_error
    if no_op:
        raise EditError(
            "the code block(s) in the answer only repeat the current code; show the changed "
            "code (or use SEARCH/REPLACE blocks)", "no_op")
    raise EditError(_NO_EDITS, "no_edits")


_NO_EDITS = (
    "no edits found: answer with SEARCH/REPLACE blocks (the file path alone on the line "
    "before `<<<<<<< SEARCH`, then `=======`, then `>>>>>>> REPLACE`) or with a unified "
    "diff in a ```diff block with `--- a/path` and `+++ b/path` headers"
)


def _apply(cand: Candidate, ws: Workspace, ctx: Context) -> str | None:
    """Apply one candidate block; its format name, or None when it is not an edit at all."""
    what = f"code block {cand.number}"
    body = cand.fence.body
    if cand.path is not None:
        path = check_path(cand.path, what)
        what = f"{what} ({path})"
        old = ws.get(path)
        view = ws.views.get(path) if ws.views else None
        if view is not None and view.answers_whole(list(body)):
            WholeFile.apply(ws, path, body)  # merged with what the model did not see
            return WholeFile.name
        body = ws.expand(path, body)
        if old is None or not path.endswith(".py"):
            WholeFile.apply(ws, path, body)
            return WholeFile.name
        block = PyBlock.parse(body)
        if block is None:
            raise EditError(
                f"{what}: the block is not valid Python, so it is neither the whole file nor "
                "whole definitions; give the whole file, whole functions, or SEARCH/REPLACE "
                "blocks", "syntax")
        if Definitions.reads_as_module(block, old):
            WholeFile.apply(ws, path, body)
            return WholeFile.name
        if not block.defs:
            raise EditError(
                f"{what}: the block holds neither the whole file nor whole definitions "
                "(functions, classes or methods) of it; give one of those, or use "
                "SEARCH/REPLACE blocks", "unplaced_definitions")
        ws.set(path, Definitions.replace(block, old, path, what))
        return Definitions.name
    if cand.fence.lang not in _PY_LANGS:
        return None
    block = PyBlock.parse(body)
    if block is None or not block.defs:
        return None
    target = Definitions.target(block, ctx, what)
    if target is None:
        sources = [p for p in ctx.files() if p.endswith(".py") and not is_test_path(p)]
        if len(sources) != 1:
            raise EditError(
                f"{what}: its definitions ({', '.join(block.names)}) exist in no file of the "
                "repository; name the file on the line before the block", "unplaced_definitions")
        target = sources[0]
    old = ws.get(target)
    if old is None:
        return None
    expanded = ws.expand(target, body)
    if expanded != body:
        block = PyBlock.parse(expanded) or block
        body = expanded
    what = f"{what} ({target})"
    if Definitions.reads_as_module(block, old):
        WholeFile.apply(ws, target, body)
        return WholeFile.name
    ws.set(target, Definitions.replace(block, old, target, what))
    return Definitions.name
