"""Which waiting candidate gets the next free verification slot: the most promising first.

At 1,000 tokens/s every candidate of a round has finished streaming long before the first
verifications end, so most wait for a sandbox; a run that stops at its first pass
(`select=first`) gets there sooner when the candidates that can pass go first. Only the order
changes: every candidate still gets its full verdict, and a candidate put last is verified
as soon as nothing more promising is being generated, waits or is being verified.

The signal is one a candidate cannot fake to jump the queue and that needs nothing but its
files: an **inert** change, one the tests cannot execute, goes after every other. A change is
inert when every file it changes is an existing Python file (a new one, even empty, may make
a package importable) and the module is the same up to the bodies of *dead* functions: plain
private top-level functions (no decorator, a name that starts with `_` and is not a dunder)
whose name appears nowhere else, neither in the other files of the candidate nor in the
repository. A public name may be imported by tests the repository does not hold (a
benchmark's hidden ones), by `import *` or by users: never dead. Adding a helper nothing
calls, or editing one, changes no test's outcome (short of reflection), so it cannot turn a
failing test into a passing one. Comments and blank lines are not in the syntax tree: a
change of only those is inert too. Among equals, the order the candidates finished
streaming in.
"""

from __future__ import annotations

import ast
import functools
import heapq
import itertools
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MAX_INDEXED_BYTES = 64 * 1024 * 1024
"""A repository larger than this is not indexed: no change in it is called inert."""

INERT, LIVE = 1, 0
"""Priority keys: lower goes first."""

ReadBase = Callable[[str], "str | None"]
Names = Callable[[], "Mapping[str, int] | None"]
"""How many of the repository's files name each identifier (built once, on first use);
None when the repository is too large to index."""

_WORD = re.compile(r"[A-Za-z_]\w*")


def priority(files: Mapping[str, str], read_base: ReadBase, repo_names: Names) -> int:
    """INERT when the change from the base files to `files` (path -> new text) is inert,
    else LIVE (also whenever that cannot be told: a non-Python file, a syntax error)."""
    bases = {p: read_base(p) for p in files}
    changed = {p: t for p, t in files.items() if bases[p] != t}
    if not changed:
        return LIVE
    dead_names: set[str] = set()
    try:
        for path, new in changed.items():
            old = bases[path]
            if old is None or not path.endswith(".py"):
                return LIVE
            before, after = _base_module(old), _module(new)
            dead = before.plain | after.plain
            if not _same_without(before, after, dead):
                return LIVE
            dead_names |= {n for n in dead if before.text_of(n) != after.text_of(n)}
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return LIVE
    if not dead_names:
        return INERT  # comments or blank lines only
    naming = repo_names()
    if naming is None:  # too large a repository to tell
        return LIVE
    olds = [bases[p] or "" for p in changed]
    for name in dead_names:
        word = re.compile(rf"\b{re.escape(name)}\b")
        if any(len(word.findall(text)) > 1 for text in [*olds, *changed.values()]):
            return LIVE  # its own `def` is the one use allowed
        # named in a file the candidate did not change: it may be called from there
        if naming.get(name, 0) > sum(1 for text in olds if word.search(text)):
            return LIVE
    return INERT


@dataclass(frozen=True)
class _Module:
    """A parsed module: its top-level statements and each one's source lines (decorators
    included), and the names of its plain private top-level functions."""

    body: list[ast.stmt]
    texts: list[str]
    plain: frozenset[str]

    def text_of(self, function: str) -> str | None:
        for node, text in zip(self.body, self.texts, strict=True):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) \
                    and node.name == function:
                return text
        return None


def _module(text: str) -> _Module:
    tree = ast.parse(text)
    lines = text.splitlines()
    texts = []
    for node in tree.body:
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        texts.append("\n".join(lines[start - 1:node.end_lineno or node.lineno]))
    plain = frozenset(
        node.name for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and not node.decorator_list
        and node.name.startswith("_") and not node.name.endswith("__"))
    return _Module(tree.body, texts, plain)


_base_module = functools.lru_cache(maxsize=8)(_module)
"""The base files are the same for every candidate of a run: parsed once."""


def _same_without(a: _Module, b: _Module, dead: frozenset[str]) -> bool:
    """Whether the two modules are the same but for the functions named `dead`: the same
    statements' text, or else the same syntax trees (comments and layout aside)."""
    def kept(m: _Module) -> list[tuple[ast.stmt, str]]:
        return [(node, text) for node, text in zip(m.body, m.texts, strict=True)
                if not (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                        and node.name in dead)]

    left, right = kept(a), kept(b)
    if [t for _, t in left] == [t for _, t in right]:
        return True
    return len(left) == len(right) and all(
        ast.dump(x) == ast.dump(y) for (x, _), (y, _) in zip(left, right, strict=True))


class VerifySlots:
    """`verify_concurrency` slots handed out by priority, then by arrival: a free slot goes
    to the waiting candidate with the lowest key, the earliest among equals. An inert one
    takes none while a live one is being verified or another candidate is still being
    generated (one that may be live: a model's streams end at different times): its
    verification would almost surely be wasted, and a live one then has the machine (its
    late stages run beside its tests, in the idle sandbox: agent/verify/spare.py)."""

    def __init__(self, slots: int) -> None:
        self._free = max(1, slots)
        self._cond = threading.Condition()
        self._waiting: list[tuple[int, int]] = []
        self._tickets = itertools.count()
        self._live_running = 0
        self._generating = 0

    @contextmanager
    def generating(self) -> Iterator[None]:
        """Around a candidate's generation (up to its patch): inert ones wait for it."""
        with self._cond:
            self._generating += 1
        try:
            yield
        finally:
            with self._cond:
                self._generating -= 1
                self._cond.notify_all()

    @contextmanager
    def slot(self, key: int = LIVE) -> Iterator[None]:
        with self._cond:
            ticket = (key, next(self._tickets))
            heapq.heappush(self._waiting, ticket)
            while not (self._free and self._waiting[0] == ticket
                       and (key == LIVE or not (self._live_running or self._generating))):
                self._cond.wait()
            heapq.heappop(self._waiting)
            self._free -= 1
            self._live_running += key == LIVE
            self._cond.notify_all()  # the next in line may take another free slot
        try:
            yield
        finally:
            with self._cond:
                self._free += 1
                self._live_running -= key == LIVE
                self._cond.notify_all()


def name_counts(root: Path, files: list[str]) -> Mapping[str, int] | None:
    """How many of `files` (repo-relative, under `root`) name each identifier: every text
    file, not only Python (an entry point in a .cfg or .toml, a doctest in .rst may call a
    function). None past MAX_INDEXED_BYTES."""
    counts: Counter[str] = Counter()
    total = 0
    for rel in files:
        path = root / rel
        try:
            total += path.stat().st_size
            if total > MAX_INDEXED_BYTES:
                return None
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        counts.update(set(_WORD.findall(text)))
    return counts
