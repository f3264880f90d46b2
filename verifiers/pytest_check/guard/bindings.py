"""The names a test module binds at its top level, recorded as its own code bound them.

A thread or hook of the code under test that rebinds a test module's `add` (imported from the
code under test) to a right function leaves the code wrong while every test that calls `add`
passes (held-out batch 5's T6). So each top-level statement of a module pytest rewrites under
the run's root that binds names (imports, assignments to names, `def`, `class`; also inside
top-level `if`/`try`/`with` blocks) is followed by `@py_ooda_bound.append(((NAME, ...),
(VALUE, ...)))`: only C calls, so no other thread runs between the binding and its record. A
name no source can write holds the list. The guard compares each test's module with the last
value recorded per name before and after the test's call (rebound.py judges who rebound it).
"""

from __future__ import annotations

import ast
import types
from typing import Any

LIST = "@py_ooda_bound"
_BLOCKS = (ast.If, ast.Try, ast.With, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def instrument(mod: ast.Module) -> None:
    """Record, after each top-level binding of `mod` below pytest's own imports, its names."""
    index = next((i + 1 for i, node in enumerate(mod.body) if _pytest_import(node)), None)
    if index is None or index >= len(mod.body):
        return
    start = ast.Assign([ast.Name(LIST, ast.Store())], ast.List([], ast.Load()))
    # located at the module's first own statement (pytest's imports have no end_lineno)
    start = ast.fix_missing_locations(ast.copy_location(start, mod.body[index]))
    mod.body = [*mod.body[:index], start, *_block(mod.body[index:])]


def recorded(module: types.ModuleType) -> dict[str, object]:
    """Name -> the value the module's own top-level code bound last (nothing for a module
    pytest did not rewrite under the root)."""
    found: dict[str, object] = {}
    entries = vars(module).get(LIST)
    if type(entries) is not list:
        return found
    for entry in entries:
        if type(entry) is tuple and len(entry) == 2 and len(entry[0]) == len(entry[1]):
            for index, name in enumerate(entry[0]):  # (no zip: strict= is Python 3.10+)
                found[name] = entry[1][index]
    return found


def _pytest_import(node: ast.stmt) -> bool:
    return type(node) is ast.Import and any(a.asname == "@pytest_ar" for a in node.names)


def _block(statements: list[Any]) -> list[Any]:
    new: list[Any] = []
    for statement in statements:
        new.append(statement)
        if isinstance(statement, _BLOCKS):
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(statement, field, None)
                if inner:
                    setattr(statement, field, _block(inner))
            for handler in getattr(statement, "handlers", None) or []:
                handler.body = _block(handler.body)
            continue
        names = _bound(statement)
        if names:
            new.append(_record(names, statement))
    return new


def _bound(statement: ast.stmt) -> list[str]:
    if isinstance(statement, (ast.Import, ast.ImportFrom)):
        names = [a.asname or a.name.split(".")[0] for a in statement.names]
    elif isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names = [statement.name]
    elif isinstance(statement, ast.Assign):
        names = [n for target in statement.targets for n in _names(target)]
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        names = _names(statement.target)
    else:
        return []
    return [n for n in dict.fromkeys(names) if n != "*" and not n.startswith("@")]


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for item in target.elts for n in _names(item)]
    return []


def _record(names: list[str], statement: ast.stmt) -> ast.stmt:
    append = ast.Attribute(ast.Name(LIST, ast.Load()), "append", ast.Load())
    keys = ast.Tuple([ast.Constant(n) for n in names], ast.Load())
    values = ast.Tuple([ast.Name(n, ast.Load()) for n in names], ast.Load())
    call = ast.Expr(ast.Call(append, [ast.Tuple([keys, values], ast.Load())], []))
    return ast.fix_missing_locations(ast.copy_location(call, statement))
