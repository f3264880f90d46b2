"""Comparisons probed before they are made, for values whose class compares by the candidate's code.

A comparison method the candidate wrote can remember: an `__eq__` that binds to the first value
it meets and compares honestly from then on answers every probe made after the test's
comparison like an honest value, and a class that is not a builtin's subclass has no builtin
to compare it as instead (redecide.py). What such a value does before the comparison is what
tells: just before an assertion compares values, each value in them whose class's comparison
methods (`__eq__`, `__ne__`, `__lt__` ...) are the candidate's doing (redecide.candidate_override:
a function on lines its patch wrote, or a callable set at run time) is asked about values it was
never given: a fresh object, then values of the scalar types the operands hold, far from them
and equal to none of the scalars the comparison holds (1 to MAX_REPEATS times, at random). Said
equal to one (or both at most and at least it): tampering. A value whose comparison depends only
on its own state says no; a remembering one binds to the probe (and says so, or fails the test's
own comparison).

Two places: every single comparison in a module pytest rewrites under the run's root (its
asserts, and also `ok = f() == 5`, `all(a == b for ...)`, `self.assertTrue(a == b)`: after
`AssertionRewriter.run`, each is made through `compare`, which probes and then compares as the
operator does), and unittest's comparing assertions (probes.py, before the original runs). A
rewritten module is never taken from a cached `.pyc` (one written without these calls would
skip them). Whatever a probe meets (an exception, a recursion) stays in the guard. What it
does not see is in docs/SECURITY.md.
"""

from __future__ import annotations

import ast
import itertools
import operator
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

from . import bindings, redecide, stores
from .provenance import deciding

flagged: list[type] = []
"""Classes whose values said they equal a probe (read by the Guard at its next check)."""
MAX_FLAGGED = 20
MAX_FOUND = 20
"""Most values probed before one comparison."""
MAX_WALKED = 100
"""Most containers and objects looked at before one comparison, breadth first (scalars are not
counted: a sticky value after 6,000 ints is found; the rest of a large object graph is left to
the re-made comparison of redecide.py after a passing assert)."""
COMPARISONS = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
"""The comparisons of an assert a remembering comparison method can pass."""
HELPER = "_ooda_compare"
"""The name rewritten modules call `compare` by, on pytest's rewrite module."""
_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})
_COMPARED = ("__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__")
_urandom = os.urandom  # the kernel's: no state a forked run would share, nothing to predict
_busy = threading.local()
_verdicts: dict[type, tuple[list[object], bool]] = {}
"""class -> (its comparison methods, whether one is the candidate's), for classes seen (the
verdict stands while the methods are the same objects)."""


class _Fresh:
    """A fresh object that nothing honest compares equal to."""


def _resolved(kind: type, name: str) -> tuple[type, object] | None:
    for cls in kind.__mro__:
        if name in cls.__dict__:
            return None if cls is object or cls in redecide.BUILTINS else (cls, cls.__dict__[name])
    return None


def candidate_compares(kind: type) -> bool:
    """Whether a comparison method a class's values compare with is the candidate's doing."""
    methods = [_resolved(kind, name) for name in _COMPARED]
    current = [m[1] if m else None for m in methods]
    known = _verdicts.get(kind)
    if known is not None and all(known[0][i] is m for i, m in enumerate(current)):
        return known[1]
    verdict = any(
        m is not None and redecide.candidate_override(m[0], _COMPARED[i], m[1])
        for i, m in enumerate(methods)
    )
    if len(_verdicts) > 10_000:
        _verdicts.clear()
    _verdicts[kind] = (current, verdict)
    return verdict


NOISE = 13
"""Random bytes one changed value is made from: a sign, a 4-byte step, 8 letters."""


def _changed(value: object, seen: set[object], noise: bytes) -> object:
    """A value of `value`'s scalar type, far from it (10**6 to 10**9 away, 8 letters more) and
    equal to no scalar the comparison holds (`seen`): no honest value in the comparison equals
    it, not even one whose own number is not visible to the guard (a sympy `Integer(6)` next to
    `5` would equal a close value). Booleans have no such value. Made from `noise` (NOISE
    random bytes; fresh ones from the kernel for each further try)."""
    for _ in range(12):
        if isinstance(value, bool):
            return _Fresh()
        step = 10**6 + int.from_bytes(noise[1:5], "little") % (10**9 - 10**6)
        step = step if noise[0] & 1 else -step
        if isinstance(value, int):
            changed: object = int(value) + step
        elif isinstance(value, float):
            changed = float(value) + step if float(value) == float(value) else 0.5 + step
        elif isinstance(value, complex):
            changed = complex(value) + step
        elif isinstance(value, str):
            changed = str.__str__(value) + _letters(noise)
        elif isinstance(value, bytes):
            changed = bytes(value) + _letters(noise).encode()
        else:
            return _Fresh()
        if changed not in seen:
            return changed
        noise = _urandom(NOISE)
    return _Fresh()


def _letters(noise: bytes) -> str:
    return bytes(97 + b % 26 for b in noise[5:NOISE]).decode("ascii")


DEFAULT_SAMPLES: dict[type, object] = {int: 0, float: 0.0, str: "", bytes: b""}
"""Scalar types a value is always probed with (besides those the operands hold)."""
MAX_REPEATS = 8
"""The changed values are made again a random number of times (1 to MAX_REPEATS): a value
that binds only to its Nth partner cannot count the guard's probes to bind to the test's."""
MAX_SEEN = 10_000
"""Most scalars of a comparison remembered (probes are kept clear of them)."""


def _probes(samples: dict[type, object], seen: set[object]) -> list[object]:
    """A fresh object and, 1 to MAX_REPEATS times, a changed value of each sample: the random
    bytes for all of them read at once (one call into the kernel, not one per letter)."""
    found: list[object] = [_Fresh()]
    scalars = [s for s in samples.values() if s is not None]
    repeats = 1 + _urandom(1)[0] % MAX_REPEATS
    noise = _urandom(NOISE * repeats * len(scalars))
    for index, sample in enumerate(scalars * repeats):
        found.append(_changed(sample, seen, noise[NOISE * index : NOISE * (index + 1)]))
    return found


def _own_scalar(value: Any, kind: type) -> object:
    """The builtin data of a scalar builtin's subclass, read by the builtin (no code of its)."""
    readers: tuple[tuple[type, Callable[[Any], object]], ...] = (
        (int, int.__int__), (float, float.__float__), (complex, complex.__complex__),
        (str, str.__str__), (bytes, lambda v: bytes.__getitem__(v, slice(None))),
    )  # fmt: skip
    for base, read in readers:
        if issubclass(kind, base):
            return read(value)
    return None


def _says_equal(value: object, other: object) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return bool(value == other) or not bool(value != other)
        except Exception:  # a strict __eq__, an array: no verdict
            return False


def _orders_equal(value: Any, other: object) -> bool:
    """Whether a value says it is both at most and at least `other` (only a value equal to it
    is, in any order). Asked with scalars only: a fresh object orders with nothing."""
    if type(other) is _Fresh:
        return False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return bool(value <= other) and bool(value >= other)
        except Exception:  # values that do not order with it: no verdict
            return False


def before(*operands: object) -> bool:
    """Probe the values in `operands` whose class compares by the candidate's code (called
    just before the comparison is made). Whether there were such values. While the probes
    run, the candidate's code reading frames is a search (provenance.deciding)."""
    if all(type(o) in _SCALARS for o in operands) or getattr(_busy, "on", False):
        return False
    _busy.on = True
    suspects: set[type] = set()
    try:
        kinds = {type(value) for value in redecide.values_in(operands, MAX_WALKED)}
        suspects = {k for k in kinds if k not in redecide.BUILTINS and candidate_compares(k)}
        if not suspects:  # (the usual case: one walk, one look per class)
            return False
        found, samples, seen = _gather(operands, suspects)
        deciding[0] += 1
        try:
            for value in found:
                if any(_says_equal(value, p) or _orders_equal(value, p)
                       for p in _probes(samples, seen)):
                    if len(flagged) < MAX_FLAGGED:
                        flagged.append(type(value))
        finally:
            deciding[0] -= 1
    except KeyboardInterrupt:
        raise
    except BaseException:  # a probe that cannot finish has no verdict
        pass
    finally:
        _busy.on = False
    return bool(suspects)


def _gather(
    operands: tuple[object, ...], suspects: set[type]
) -> tuple[list[object], dict[type, object], set[object]]:
    """The values to probe (of the `suspects`: classes that compare by the candidate's code),
    a sample scalar of each type the operands hold (and the defaults), and the scalars they
    hold."""
    found: list[object] = []
    samples: dict[type, object] = {}
    seen: set[object] = set()

    def sample(item: object) -> None:
        samples.setdefault(type(item), item)
        if len(seen) < MAX_SEEN:
            seen.add(item)

    for operand in operands:
        if type(operand) in _SCALARS:
            sample(operand)
    for value in redecide.values_in(operands, MAX_WALKED):
        kind = type(value)
        for item in _scalars(value, kind):
            sample(item)
        if kind not in redecide.BUILTINS:
            own = _own_scalar(value, kind)
            if own is not None:
                sample(own)
            if kind in suspects and len(found) < MAX_FOUND:
                found.append(value)
    for kind, default in DEFAULT_SAMPLES.items():
        samples.setdefault(kind, default)
    return found, samples, seen


def _scalars(value: object, kind: type) -> list[object]:
    """Some scalars a value holds: a builtin container's items, an object's attributes."""
    if kind in redecide.BUILTINS:
        if issubclass(kind, dict):
            pairs: Any = dict.items(value)  # type: ignore[arg-type]
            items: list[object] = [p for pair in itertools.islice(pairs, 500) for p in pair]
        else:
            items = list(itertools.islice(iter(value), 1000))  # type: ignore[call-overload]
    else:
        attributes = redecide._dict_of(value)
        items = list(itertools.islice(attributes.values(), 100)) if attributes else []
    return [item for item in items if type(item) in _SCALARS]


def install(rewrite: Any, root: str) -> None:
    """Put the probe in each comparison of the modules pytest rewrites under `root` (through
    its `rewrite` module), and never reuse such a module's cached bytecode."""
    setattr(rewrite, HELPER, compare)
    setattr(rewrite, stores.HELPER, stores.stored)
    rewriter = rewrite.AssertionRewriter
    rewriter.run = _instrumented(rewriter.run, root)
    read_pyc = getattr(rewrite, "_read_pyc", None)
    if callable(read_pyc):
        rewrite._read_pyc = _no_cached_pyc(read_pyc, root)


_OPERATORS: tuple[Callable[[Any, Any], object], ...] = (
    operator.eq, operator.ne, lambda a, b: a in b, lambda a, b: a not in b,
    operator.lt, operator.le, operator.gt, operator.ge,
)  # fmt: skip
"""What each of COMPARISONS does, in its order."""


def _nothing(left: Any, right: Any, index: int, result: object) -> None:
    return None


after_assert: Callable[[Any, Any, int, object], None] = _nothing
"""What is done with an assert's comparison once made (probes.py: a passing one's operands
probed and the comparison made again with builtins' own methods; set by probes.install)."""


def compare(left: Any, right: Any, index: int, asserted: bool = False) -> object:
    """`left <op> right` (op: COMPARISONS[index]), its values probed first when they are not
    both builtin scalars, and, for an assert's own comparison (`asserted`), handed with its
    result to `after_assert`. What a rewritten test module calls in place of each comparison."""
    __tracebackhide__ = True  # pytest leaves this frame out of its tracebacks
    if type(left) in _SCALARS and type(right) in _SCALARS:
        return _OPERATORS[index](left, right)
    if before(left, right):
        deciding[0] += 1  # the test's own comparison of such a value: no frame reading either
        try:
            result = _OPERATORS[index](left, right)
        finally:
            deciding[0] -= 1
    else:
        result = _OPERATORS[index](left, right)
    if asserted:
        after_assert(left, right, index, result)
    return result


def _no_cached_pyc(original: Callable[..., Any], root: str) -> Callable[..., Any]:
    """pytest's `_read_pyc`, except that a module under `root` is never read from its cache
    (elsewhere, pytest's own tests of its cache, it is pytest's)."""

    def _read_pyc(source: object, *args: Any, **kwargs: Any) -> Any:
        if str(source).startswith(root):
            return None
        return original(source, *args, **kwargs)

    return _read_pyc


def _instrumented(original: Callable[..., Any], root: str) -> Callable[..., Any]:
    """pytest's `AssertionRewriter.run`, then, in a module under `root` that it gave its helper
    import, every single comparison (in asserts or not: `ok = f() == 5`, `all(a == b for ...)`,
    `self.assertTrue(a == b)`) made through `compare`, and each store into an attribute of a
    dotted name followed by a call of stores.stored."""

    def run(self: Any, mod: ast.Module) -> None:
        original(self, mod)
        path = str(getattr(self, "module_path", None) or "")
        if path.startswith(root) and _imports_helpers(mod):
            _instrument_comparisons(mod)  # locates its own nodes: pytest's imports have no
            # end_lineno, and fix_missing_locations over the module would give them line 1
            # (compile: "AST node line range (3, 1) is not valid" below a comment or docstring)
            stores.instrument(mod)  # the test code's own stores into watched names noted
            bindings.instrument(mod)  # the names its top level binds, recorded as bound

    return run


def _imports_helpers(mod: ast.Module) -> bool:
    return any(
        type(node) is ast.Import and any(a.asname == "@pytest_ar" for a in node.names)
        for node in mod.body
    )


_LEAVES = (ast.Name, ast.Constant, ast.expr_context, ast.operator, ast.cmpop, ast.boolop,
           ast.unaryop, ast.alias, ast.arg)  # fmt: skip
"""Nodes with nothing below them that could be a comparison."""


def _instrument_comparisons(node: ast.AST) -> ast.AST:
    """`node` with every single comparison below it (and itself) made through `compare`,
    pytest's explanation branches left out (one pass, no visitor dispatch per node)."""
    for field in node._fields:
        value = getattr(node, field, None)
        if type(value) is list:
            for index, item in enumerate(value):
                if isinstance(item, ast.AST) and not isinstance(item, _LEAVES):
                    if stores.explanation_only(item):
                        continue
                    new = _instrument_comparisons(item)
                    if new is not item:
                        value[index] = new
        elif isinstance(value, ast.AST) and not isinstance(value, _LEAVES):
            new = _instrument_comparisons(value)
            if new is not value:
                setattr(node, field, new)
    if type(node) is ast.Compare:
        return _through_compare(node)
    if _asserts(node):  # `@py_assertN = <its comparison>`, which the line above made a call
        made: Any = getattr(node, "value", None)
        if _helper_call(made) and len(made.args) == 3:
            made.args.append(ast.copy_location(ast.Constant(True), made))
    return node


def _helper_call(node: object) -> bool:
    """A call of `compare` this module put in (`@pytest_ar._ooda_compare(...)`)."""
    if type(node) is not ast.Call:
        return False
    func = node.func
    return (
        type(func) is ast.Attribute
        and func.attr == HELPER
        and type(func.value) is ast.Name
        and func.value.id == "@pytest_ar"
    )


def _asserts(node: ast.AST) -> bool:
    """pytest's rewriter storing an assert's own comparison (`@py_assertN = a == b`: a name
    no source code can write)."""
    if type(node) is not ast.Assign or len(node.targets) != 1:
        return False
    target = node.targets[0]
    return type(target) is ast.Name and target.id.startswith("@py_assert")


def _through_compare(node: ast.Compare) -> ast.AST:
    if len(node.ops) != 1 or not isinstance(node.ops[0], COMPARISONS):
        return node
    index = next(i for i, kind in enumerate(COMPARISONS) if isinstance(node.ops[0], kind))
    helper = ast.Attribute(ast.Name("@pytest_ar", ast.Load()), HELPER, ast.Load())
    call = ast.Call(helper, [node.left, node.comparators[0], ast.Constant(index)], [])
    return ast.fix_missing_locations(ast.copy_location(call, node))
