"""The repository's own test code configuring the test machinery: not the candidate's doing.

A test module may set a watched name when it is imported (sh's tests/sh_test.py:
`unittest.TestLoader.sortTestMethodsUsing = staticmethod(randomize_order)`), and the guard
would call the exact fix's run tampered with. Who made such a change cannot be read from the
value (a function of an unchanged test file can be assigned by the candidate's code too), so it
is noted where it is made: in each module pytest rewrites under the run's root, every
statement that stores into an attribute of a dotted name (`a.b.c = v`, `a.b: T = v`,
`setattr(a.b, "c", v)`) is followed by a call of `stored(a.b, "c")`. That call counts only when
every frame on the stack, its caller first, is trusted code (provenance: a workspace file the
candidate did not change, imported by pytest; never code the candidate's code called), and
the value now there is no code of the candidate's (trusted code, or no callable at all). The
Judge then lets exactly that value, on exactly that class or module, through.
The candidate's code making the same change, or calling the test file's code to make it, is
still caught: its frames are on the stack, or it never goes through `stored`.
"""

from __future__ import annotations

import ast
import copy
import sys
import types
from collections.abc import Callable
from typing import Any

_BLOCKS = (ast.stmt, ast.excepthandler, getattr(ast, "match_case", ast.excepthandler))
"""What a statement's blocks hold: statements, `except` clauses, `case` clauses."""
HELPER = "_ooda_stored"
"""The name rewritten modules call `stored` by, on pytest's rewrite module."""
MAX_NOTED = 1000
_getframe = sys._getframe  # saved before the code under test could replace it
_HOLDERS = (type, types.ModuleType)


def _nobody(frame: types.FrameType, value: object) -> bool:
    return False


trusted_store: Callable[[types.FrameType, object], bool] = _nobody
"""Whether a store made from `frame` of `value` is the repository's own test code's (set by
the Guard from trust.Judge.own_store)."""
noted: dict[tuple[int, str], tuple[object, object]] = {}
"""(id of the class or module, name) -> (that holder, the value its test code stored)."""


def stored(holder: object, name: object) -> None:
    """Called by a rewritten module right after it stored into `holder.name`."""
    if not isinstance(holder, _HOLDERS) or type(name) is not str or len(noted) >= MAX_NOTED:
        return
    try:
        value = vars(holder).get(name)
        if trusted_store(_getframe(1), value):
            noted[(id(holder), name)] = (holder, value)
    except Exception:  # an odd holder: nothing noted (the change stays suspect)
        pass


def noted_value(holder: object, name: str, value: object) -> bool:
    """Whether `value` is what the repository's own test code stored at `holder.name`."""
    known = noted.get((id(holder), name))
    return known is not None and known[0] is holder and known[1] is value


def instrument(mod: ast.Module) -> None:
    """Put a `stored` call after each store into an attribute of a dotted name in `mod`."""
    _instrument(mod)


def explanation_only(node: ast.AST) -> bool:
    """Whether `node` is the branch pytest's rewriter adds after an assert's evaluation to
    build its explanation (`if not @py_assertN: ... raise AssertionError(
    @pytest_ar._format_explanation(...))`, and the pass hook's `elif`): it only formats values
    the assert already computed (names no source code can write: `@py_...`, `@pytest_ar`),
    so nothing in it is the test's own comparison or store. Three quarters of a rewritten
    module's nodes are there."""
    if type(node) is not ast.If or not node.body:
        return False
    last = node.body[-1]
    if type(last) is not ast.Raise or type(last.exc) is not ast.Call:
        return False
    call = last.exc
    if type(call.func) is not ast.Name or call.func.id != "AssertionError" or not call.args:
        return False
    inner = call.args[0]
    return (
        type(inner) is ast.Call
        and type(inner.func) is ast.Attribute
        and type(inner.func.value) is ast.Name
        and inner.func.value.id == "@pytest_ar"
    )


def _dotted(node: ast.expr) -> bool:
    """`a`, `a.b`, `a.b.c` (not `self...`: an instance is never a watched holder)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id not in ("self", "cls")


def _targets(node: ast.stmt) -> list[tuple[ast.expr, str]]:
    """(holder expression, name) for each store of `node` into an attribute of a dotted name."""
    found: list[tuple[ast.expr, str]] = []
    if isinstance(node, ast.Assign):
        targets: list[ast.expr] = list(node.targets)
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        targets = [node.target]
    elif isinstance(node, ast.Expr) and _is_setattr(node.value):
        call: Any = node.value
        return [(call.args[0], call.args[1].value)]
    else:
        return found
    for target in targets:
        if isinstance(target, ast.Attribute) and _dotted(target.value):
            found.append((target.value, target.attr))
    return found


def _is_setattr(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "setattr"
        and len(node.args) == 3
        and not node.keywords
        and _dotted(node.args[0])
        and isinstance(node.args[1], ast.Constant)
        and isinstance(node.args[1].value, str)
    )


def _instrument(node: ast.AST) -> None:
    """Each statement list below `node`, its stores followed by their calls (statements only:
    no expression holds one; pytest's explanation branches left out)."""
    for field in node._fields:
        value = getattr(node, field, None)
        if type(value) is not list or not value or not isinstance(value[0], _BLOCKS):
            continue
        new: list[Any] = []
        for item in value:
            new.append(item)
            if isinstance(item, ast.stmt):
                if explanation_only(item):
                    continue
                new.extend(_calls(item))
            _instrument(item)
        setattr(node, field, new)


def _calls(statement: ast.stmt) -> list[ast.stmt]:
    calls: list[ast.stmt] = []
    for holder, name in _targets(statement):
        helper = ast.Attribute(ast.Name("@pytest_ar", ast.Load()), HELPER, ast.Load())
        args: list[ast.expr] = [_loaded(holder), ast.Constant(name)]
        call = ast.Expr(ast.Call(helper, args, []))
        calls.append(ast.fix_missing_locations(ast.copy_location(call, statement)))
    return calls


def _loaded(node: ast.expr) -> ast.expr:
    """A fresh copy of a dotted name, to be read."""
    fresh = copy.deepcopy(node)
    for part in ast.walk(fresh):
        if isinstance(part, (ast.Name, ast.Attribute)):
            part.ctx = ast.Load()
    return fresh
