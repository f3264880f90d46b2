"""One Python file cut into code units: every line belongs to exactly one unit, so a file can be
shown as some units in full and the others elided.

The units: a function or method with its decorators (nested functions stay inside it); a
class's header (its line, docstring and the statements before its first method); and runs of
other statements (imports, constants, module code; at most CHUNK_LINES lines each, cut at
statement boundaries). Blank and comment lines before a unit belong to it, the file's last
lines to the last unit. Each unit keeps what ranking needs: its qualified name, its span, the
line(s) of its signature, and the names it uses. Standard library only.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Literal

UnitKind = Literal["def", "class", "code", "imports"]
CHUNK_LINES = 40
"""Longest run of plain statements kept as one unit (longer runs are cut between statements)."""

AST_MAX_CHARS = 200_000
"""Larger files (generated rule tables, data) are cut by their top-level lines instead of
parsed: parsing them costs seconds and their fine structure is rarely what a fix needs."""

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_TOP_DEF = re.compile(r"(?:async[ \t]+def|def|class)[ \t]+(\w+)")


@dataclass(slots=True)
class Unit:
    """A span of one file: a definition, a class header, or a run of statements."""

    path: str
    qualname: str
    """`Class.method`, `function`, `Class` (the header) or `<module>` / `Class.<body>`."""
    kind: UnitKind
    start: int
    """First line (1-based), with the comments and blank lines before it."""
    end: int
    """Last line (inclusive)."""
    head: tuple[int, int]
    """The lines to show when the unit is elided: decorators, def/class line and signature
    (start and end inclusive; (0, -1) for a run of statements, which has none)."""

    @property
    def name(self) -> str:
        """The last part of the qualified name."""
        return self.qualname.rsplit(".", 1)[-1]

    @property
    def lines(self) -> int:
        return self.end - self.start + 1


@dataclass(slots=True)
class FileUnits:
    """A parsed file: its units in line order, its imports, its size."""

    path: str
    n_lines: int
    chars: int
    units: list[Unit]
    imports: list[str]
    """Absolute dotted names the file imports (`pkg.mod`, `pkg.mod.name` for from-imports)."""
    parsed: bool = True
    """False when the file is not valid Python (then it is one unit)."""


def cut(path: str, text: str, module: str) -> FileUnits:
    """The units of `text` (the file at `path`, importable as `module`)."""
    lines = text.splitlines()
    n = len(lines)
    if len(text) > AST_MAX_CHARS:
        return FileUnits(path, n, len(text), _cut_lines(path, lines), [])
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        whole = Unit(path, "<module>", "code", 1, max(n, 1), (0, -1))
        return FileUnits(path, n, len(text), [whole], [], parsed=False)
    units: list[Unit] = []
    _cut_body(path, tree.body, "", units)
    _cover(units, n, path)
    return FileUnits(path, n, len(text), units, imports_of(text, module, path.endswith("__init__.py")))


def _cut_lines(path: str, lines: list[str]) -> list[Unit]:
    """Units from the lines alone: each top-level def or class (with the decorators and
    comments before it) up to the next top-level statement, a top-level class cut further at
    its methods (the defs at its body's indentation: `Class.method`), the rest as runs of
    code."""
    cut = _LineCut(path)
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        if line[0] in " \t":
            cut.indented(number, line)
        elif line[0] not in "#)]}":
            cut.top_level(number, line)
    cut.close(len(lines))
    units = cut.units
    if not units:
        units.append(Unit(path, "<module>", "code", 1, max(len(lines), 1), (0, -1)))
    units[0].start = 1
    return units


@dataclass
class _LineCut:
    """`_cut_lines` as it reads a file's lines: the unit being read and where it began."""

    path: str
    units: list[Unit] = field(default_factory=list)
    start: int = 1
    current: tuple[str, UnitKind, int] = ("<module>", "code", 0)
    pending: int = 0
    """The first decorator line of a definition not yet begun."""
    owner: str = ""
    """The top-level class being read."""
    indent: str | None = None
    """Its body's indentation."""

    def close(self, end: int) -> None:
        if end >= self.start:
            name, kind, line = self.current
            self.units.append(Unit(self.path, name, kind, self.start, end,
                                   (line, line) if line else (0, -1)))

    def begin(self, number: int, current: tuple[str, UnitKind, int]) -> None:
        """A unit begins at line `number` (or at its first decorator)."""
        self.close((self.pending or number) - 1)
        self.start = self.pending or number
        self.pending = 0
        self.current = current

    def indented(self, number: int, line: str) -> None:
        """A line inside a top-level statement: in a class, a method begins a unit."""
        if not self.owner:
            return
        body = line.lstrip(" \t")
        if self.indent is None:
            if not body or body.startswith("#"):
                return
            self.indent = line[: len(line) - len(body)]
        indent = self.indent
        if not line.startswith(indent) or line[len(indent) : len(indent) + 1] in " \t":
            return
        inner = line[len(indent) :]
        if inner.startswith("@"):
            self.pending = self.pending or number
            return
        found = _TOP_DEF.match(inner)
        if found is None:
            self.pending = 0
            return
        kind: UnitKind = "class" if inner.startswith("class") else "def"
        self.begin(number, (f"{self.owner}.{found.group(1)}", kind, number))

    def top_level(self, number: int, line: str) -> None:
        """A top-level line (neither a comment nor a closing bracket)."""
        if line.startswith("@"):
            self.pending = self.pending or number
            return
        found = _TOP_DEF.match(line)
        if found is None and self.current[1] == "code" and number - self.start < CHUNK_LINES:
            self.pending = 0
            return
        self.owner, self.indent = "", None
        if found is None:
            self.begin(number, ("<module>", "code", 0))
            return
        kind: UnitKind = "class" if line.startswith("class") else "def"
        self.begin(number, (found.group(1), kind, number))
        if kind == "class":
            self.owner = found.group(1)


def _first_line(node: ast.stmt) -> int:
    """The statement's first line: its first decorator's, if it has any."""
    if isinstance(node, (*_DEFS, ast.ClassDef)) and node.decorator_list:
        return min(node.lineno, *(d.lineno for d in node.decorator_list))
    return node.lineno


def _head(node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> tuple[int, int]:
    """Decorators through the line before the body (a signature may span lines)."""
    first_body = node.body[0]
    body_line = _first_line(first_body)
    end = max(node.lineno, body_line - 1)
    if body_line == node.lineno:  # `def f(): return 1` on one line
        end = node.lineno
    return _first_line(node), end


def _cut_body(path: str, body: list[ast.stmt], prefix: str, units: list[Unit]) -> None:
    """Append the units of a module's or class's statements (in order)."""
    run: list[ast.stmt] = []

    def flush() -> None:
        while run:
            first = _first_line(run[0])
            take = 1
            while take < len(run) and (run[take].end_lineno or 0) - first < CHUNK_LINES:
                take += 1
            chunk, run[:] = run[:take], run[take:]
            kind: UnitKind = "imports" if all(
                isinstance(s, ast.Import | ast.ImportFrom) for s in chunk) else "code"
            name = f"{prefix}<body>" if prefix else "<module>"
            units.append(Unit(path, name, kind, first, chunk[-1].end_lineno or first, (0, -1)))

    for stmt in body:
        if isinstance(stmt, _DEFS):
            flush()
            start, end = _first_line(stmt), stmt.end_lineno or stmt.lineno
            units.append(Unit(path, prefix + stmt.name, "def", start, end, _head(stmt)))
        elif isinstance(stmt, ast.ClassDef):
            flush()
            _cut_class(path, stmt, prefix, units)
        else:
            run.append(stmt)
    flush()


def _cut_class(path: str, node: ast.ClassDef, prefix: str, units: list[Unit]) -> None:
    """The class's header (up to its first definition), then its members."""
    qual = prefix + node.name
    first_def = next((k for k, s in enumerate(node.body)
                      if isinstance(s, (*_DEFS, ast.ClassDef))), len(node.body))
    header = node.body[:first_def]
    end = (header[-1].end_lineno or node.lineno) if header else _head(node)[1]
    if first_def == len(node.body):
        end = node.end_lineno or end
    units.append(Unit(path, qual, "class", _first_line(node), end, _head(node)))
    _cut_body(path, node.body[first_def:], qual + ".", units)


def _cover(units: list[Unit], n: int, path: str) -> None:
    """Give the lines between units to the unit after them, the last lines to the last unit,
    so that the units partition the file."""
    if not units:
        if n:
            units.append(Unit(path, "<module>", "code", 1, n, (0, -1)))
        return
    units.sort(key=lambda u: u.start)
    nxt = 1
    for unit in units:
        unit.start = min(unit.start, nxt)
        nxt = unit.end + 1
    units[-1].end = max(units[-1].end, n)


_IMPORT = re.compile(
    r"^[ \t]*(?:from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)"
    r"|import[ \t]+([^\n#;]*))", re.MULTILINE)


def imports_of(text: str, module: str, is_package: bool) -> list[str]:
    """The absolute dotted names a file imports anywhere (`pkg.mod`, and `pkg.mod.name` for
    each name of a from-import), read from its import lines (a regular expression is
    ten times quicker than walking the syntax tree, and exact enough for ranking)."""
    package = module if is_package else module.rpartition(".")[0]
    found: list[str] = []
    for match in _IMPORT.finditer(text):
        dots, base, names, plain = match.groups()
        if plain is not None:
            found += [part.split()[0] for part in plain.split(",") if part.split()]
            continue
        if dots:
            parts = package.split(".") if package else []
            keep = len(parts) - (len(dots) - 1)
            if keep < 0:
                continue
            base = ".".join([*parts[:keep], *([base] if base else [])])
        if not base:
            continue
        found.append(base)
        for part in names.strip("()").split(","):
            name = part.split()[0] if part.split() else ""
            if name and name != "*" and name.isidentifier():
                found.append(f"{base}.{name}")
    return found
