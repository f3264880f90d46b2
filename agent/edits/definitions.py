"""Definitions: a fenced Python block of whole functions, methods or classes that replace
the definitions of the same qualified names in the one file that has them.

Matched through the AST: the rest of the file stays as it was, each replacement moves to
the indentation of the definition it replaces, a replaced definition keeps its decorators
unless the block gives its own, a class in the block that shows only some of its methods
replaces those methods alone, and imports the block adds go after the file's imports.
Names defined in no file, or in several, are an EditError naming them and the files.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

from ooda.agent.edits.base import Context, EditError, bodies, splice

Def = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
_DEF_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


@dataclass
class PyBlock:
    """A fenced block read as Python: its lines (dedented) and syntax tree."""

    lines: list[str]
    tree: ast.Module

    @classmethod
    def parse(cls, body: Sequence[str]) -> PyBlock | None:
        """The block as Python, or None when it is not valid Python."""
        text = "\n".join(_dedent([ln.expandtabs(8) for ln in body] if _mixed(body) else body))
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
        return cls(text.split("\n"), tree)

    @property
    def defs(self) -> list[Def]:
        return [n for n in self.tree.body if isinstance(n, _DEF_TYPES)]

    @property
    def names(self) -> list[str]:
        return [n.name for n in self.defs]


def _dedent(lines: list[str] | Sequence[str]) -> list[str]:
    """The lines without the indentation they all share (whitespace-only lines kept as
    they are, unlike textwrap.dedent, so the file's blank lines survive unchanged)."""
    indents = [ln[: len(ln) - len(ln.lstrip())] for ln in lines if ln.strip()]
    if not indents:
        return list(lines)
    common = indents[0]
    for ind in indents[1:]:
        while not ind.startswith(common):
            common = common[:-1]
    if not common:
        return list(lines)
    return [ln[len(common):] if ln.startswith(common) else ln for ln in lines]


def _indent_like(new: list[str], file_lines: list[str]) -> list[str]:
    """`new` with its leading tabs as four spaces when the file indents with spaces only,
    or its leading runs of four spaces as tabs when the file indents with tabs only."""
    spaces = any(line.startswith(" ") for line in file_lines)
    tabs = any(line.startswith("\t") for line in file_lines)
    out = []
    for line in new:
        text = line.lstrip(" \t")
        lead = line[: len(line) - len(text)]
        if spaces and not tabs:
            lead = lead.replace("\t", "    ")
        elif tabs and not spaces:
            lead = lead.replace("    ", "\t")
        out.append(lead + text)
    return out


def _mixed(body: Sequence[str]) -> bool:
    """True when some lines are indented with tabs and others with spaces."""
    tabs = any(line.startswith("\t") for line in body)
    spaces = any(line.startswith(" ") for line in body)
    return tabs and spaces


def is_test_path(path: str) -> bool:
    """Test files and conftest.py: never a target for a pathless block."""
    p = PurePosixPath(path)
    return (p.name.startswith("test_") or p.name.endswith("_test.py")
            or p.name == "conftest.py" or bool({"tests", "test"} & set(p.parts[:-1])))


def module_defs(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _defines(tree: ast.Module, name: str) -> bool:
    """True when the module defines `name` at top level or as a method of a top-level class."""
    for node in tree.body:
        if isinstance(node, _DEF_TYPES) and node.name == name:
            return True
        if isinstance(node, ast.ClassDef) and any(
            isinstance(m, _DEF_TYPES) and m.name == name for m in node.body
        ):
            return True
    return False


class Definitions:
    """Whole definitions in a fenced Python block, replaced where they are defined."""

    name: ClassVar[str] = "definitions"
    prompt: ClassVar[str] = (
        "A ```python block holding whole functions, methods or classes that exist in exactly "
        "one file replaces those definitions there (name the file on the line before the "
        "block when the names are not unique)."
    )
    begins: ClassVar[str] = r"```|~~~"

    @staticmethod
    def find_files(names: list[str], ctx: Context) -> dict[str, list[str]]:
        """Name -> the non-test Python files of the repository that define it."""
        where: dict[str, list[str]] = {name: [] for name in names}
        patterns = {
            name: re.compile(rf"^[ \t]*(?:async[ \t]+def|def|class)[ \t]+{re.escape(name)}\b",
                             re.MULTILINE)
            for name in names
        }
        for path in ctx.files():
            if not path.endswith(".py") or is_test_path(path):
                continue
            text = ctx.read_file(path)
            if text is None:
                continue
            hits = [n for n in names if patterns[n].search(text)]
            if not hits:
                continue
            tree = module_defs(text)
            if tree is None:
                continue
            for n in hits:
                if _defines(tree, n):
                    where[n].append(path)
        return where

    @classmethod
    def target(cls, block: PyBlock, ctx: Context, what: str) -> str | None:
        """The one file that defines every name of the block; None when no file defines
        any; EditError naming names and files when it is ambiguous."""
        names = block.names
        where = cls.find_files(names, ctx)
        common = set.intersection(*(set(files) for files in where.values())) if where else set()
        if len(common) == 1:
            return common.pop()
        if not any(where.values()):
            return None
        listing = "; ".join(f"{n}: {', '.join(f) or 'no file'}" for n, f in where.items())
        if len(common) > 1:
            raise EditError(
                f"{what}: the definitions ({', '.join(names)}) exist in several files "
                f"({', '.join(sorted(common))}); name the file on the line before the block "
                "or use SEARCH/REPLACE blocks", "ambiguous_definitions")
        raise EditError(
            f"{what}: no single file defines all of the block's names ({listing}); give one "
            "block per file with its path on the line before it, or use SEARCH/REPLACE blocks",
            "ambiguous_definitions")

    @staticmethod
    def covers(block: PyBlock, text: str) -> bool:
        """True when the block defines every top-level definition of the file and repeats its
        imports (and so reads as the whole file rather than a few of its definitions)."""
        tree = module_defs(text)
        if tree is None:
            return True
        wanted = {n.name for n in tree.body if isinstance(n, _DEF_TYPES)}
        if not wanted <= set(block.names):
            return False
        lines = text.split("\n")
        shown = {line.strip() for line in block.lines}
        return all(
            lines[node.lineno - 1].strip() in shown
            for node in tree.body
            if isinstance(node, ast.Import | ast.ImportFrom)
        )

    @staticmethod
    def reads_as_module(block: PyBlock, text: str) -> bool:
        """True when the block is the whole file: it defines all the file's definitions,
        repeats its imports, and holds module-level code besides definitions and imports (a
        block of definitions alone replaces those definitions, keeping the rest)."""
        if not Definitions.covers(block, text):
            return False
        return any(not isinstance(n, (*_DEF_TYPES, ast.Import, ast.ImportFrom))
                   for n in block.tree.body) or not block.defs

    @classmethod
    def replace(cls, block: PyBlock, text: str, path: str, what: str) -> str:
        """`text` (the file at `path`) with the block's definitions put in place."""
        tree = module_defs(text)
        if tree is None:
            raise EditError(f"{what}: {path} is not valid Python, so its definitions cannot "
                            "be found; use SEARCH/REPLACE blocks", "unplaced_definitions")
        file_lines = bodies(text)
        placing = _Placing(block, file_lines)
        for node in block.defs:
            placing.match(node, tree.body, "", top=True)
        edits, unmatched, ambiguous = placing.edits, placing.unmatched, placing.ambiguous
        if ambiguous:
            name, classes = next(iter(ambiguous.items()))
            raise EditError(
                f"{what}: {name} is ambiguous in {path}: a method of classes "
                f"{', '.join(classes)}; show it inside its class (`class {classes[0]}:` with the "
                "method indented under it), or use SEARCH/REPLACE blocks",
                "ambiguous_definitions")
        if unmatched:
            have = ", ".join(n.name for n in tree.body if isinstance(n, _DEF_TYPES)) or "none"
            raise EditError(
                f"{what}: these definitions match nothing in {path}: {', '.join(unmatched)} "
                f"(its top-level definitions: {have}); replace existing definitions by their "
                "exact names, or add new code with SEARCH/REPLACE blocks",
                "unplaced_definitions")
        imports = cls._new_imports(block, tree, file_lines)
        if imports:
            edits.append(imports)
        for start, end, new in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
            text = splice(text, start, end - start, new)
        return text

    @staticmethod
    def _replacement(block: PyBlock, node: Def, target: Def,
                     file_lines: list[str]) -> tuple[int, int, list[str]]:
        """(start, end, lines): the file's lines [start, end) that `node` replaces."""
        keep_decorators = not node.decorator_list
        start = target.lineno if keep_decorators or not target.decorator_list else min(
            d.lineno for d in target.decorator_list)
        end = target.end_lineno or target.lineno
        first = node.lineno if not node.decorator_list else min(
            d.lineno for d in node.decorator_list)
        new = block.lines[first - 1 : node.end_lineno or node.lineno]
        while new and not new[-1].strip():
            new.pop()
        def_line = file_lines[target.lineno - 1]
        file_indent = def_line[: len(def_line) - len(def_line.lstrip())]
        block_def = block.lines[node.lineno - 1]
        block_indent = block_def[: len(block_def) - len(block_def.lstrip())]
        if file_indent != block_indent:
            new = [file_indent + line[len(block_indent):] if line.startswith(block_indent)
                   and line.strip() else line for line in new]
        return start - 1, end, _indent_like(new, file_lines)

    @staticmethod
    def _new_imports(block: PyBlock, tree: ast.Module,
                     file_lines: list[str]) -> tuple[int, int, list[str]] | None:
        """An insertion of the block's top-level imports the file lacks, after its imports."""
        present = {line.strip() for line in file_lines}
        added = []
        for node in block.tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                lines = block.lines[node.lineno - 1 : node.end_lineno or node.lineno]
                if not all(line.strip() in present for line in lines):
                    added += [line.strip() if len(lines) == 1 else line for line in lines]
        if not added:
            return None
        at = 0
        for node in tree.body:
            if isinstance(node, ast.Import | ast.ImportFrom):
                at = node.end_lineno or node.lineno
            elif at == 0 and isinstance(node, ast.Expr) and isinstance(
                    node.value, ast.Constant) and isinstance(node.value.value, str):
                at = node.end_lineno or node.lineno
        if at and at == (tree.body[0].end_lineno if tree.body else 0) and not any(
                isinstance(n, ast.Import | ast.ImportFrom) for n in tree.body):
            added = ["", *added]
        return at, at, added


@dataclass
class _Placing:
    """Where a block's definitions go in one file: the edits found, the names that matched
    nothing, and (at the top level) the methods several classes define."""

    block: PyBlock
    file_lines: list[str]
    edits: list[tuple[int, int, list[str]]] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    ambiguous: dict[str, list[str]] = field(default_factory=dict)

    def match(self, node: Def, scope: list[ast.stmt], qual: str, top: bool = False) -> None:
        """Find `node`'s definition in `scope` (a class shown with only some of its methods:
        each of them in the class's body)."""
        target = next((t for t in scope if isinstance(t, _DEF_TYPES) and t.name == node.name),
                      None)
        if target is None and top and not isinstance(node, ast.ClassDef):
            owners = [(c.name, m) for c in scope if isinstance(c, ast.ClassDef) for m in c.body
                      if isinstance(m, _DEF_TYPES) and m.name == node.name]
            if len(owners) == 1:
                target = owners[0][1]
            elif owners:  # which class's: not ours to guess
                self.ambiguous[node.name] = [owner for owner, _ in owners]
                return
        if target is None:
            self.unmatched.append(qual + node.name)
            return
        if isinstance(node, ast.ClassDef) and isinstance(target, ast.ClassDef):
            shown = {m.name for m in node.body if isinstance(m, _DEF_TYPES)}
            existing = {m.name for m in target.body if isinstance(m, _DEF_TYPES)}
            if not existing <= shown:
                for member in node.body:
                    if isinstance(member, _DEF_TYPES):
                        self.match(member, target.body, f"{qual}{node.name}.")
                return
        self.edits.append(Definitions._replacement(self.block, node, target, self.file_lines))
