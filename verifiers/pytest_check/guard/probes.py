"""The always-equal probe, judged by behaviour: a value that an assertion found equal to its
partner is compared again with a *different* partner (a fresh object, and another value of the
partner's own type: 5 becomes 7924, "ab" becomes "ab\\x00probe"); a value equal to both is not
comparing values. Where the type says it lives (`__module__`), and whether `__eq__` is Python
code or a C function (`functools.partial(operator.is_not, None)`), make no difference; which
types may do this legitimately (`mock.ANY`, the tests' own wildcards) the Guard decides by the
provenance of the class (provenance.py).

Three places see passing comparisons:
- each comparison of a rewritten `assert` in a module of the run, as beforehand.compare makes
  it (`_after_assert`): once it holds, its operands are probed; pytest builds no explanation;
- pytest's assertion-pass path, when the repository's configuration turns it on
  (`enable_assertion_pass_hook`): every comparison of a
  passing rewritten `assert` reaches `_call_reprcompare` with its operands, and the guard's
  version probes them instead of formatting a diff. The pass path is switched on only for
  test modules of the run itself (`_check_if_assertion_pass_impl`), so a nested pytest run in
  a test (pytester) sees pytest as it is without the guard. Of the explanation pytest builds
  there, only the comparisons' operands are wanted: the `repr()` of every other value of the
  assert is skipped (a placeholder), as pytest skips all of it without the pass path, since a
  repr can change what the test observes afterwards (pydata/xarray's
  test_tokenize_duck_dask_array: a Variable's repr changed its dask token);
- unittest's `assertEqual`, `assertAlmostEqual` and `assertIn`, wrapped before the snapshot:
  once the original passed, its operands are probed the same way.
"""

from __future__ import annotations

import functools
import operator
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from . import beforehand
from .redecide import decided_by_candidate

MAX_PROBED = 1000
"""Most values looked at per comparison (builtin containers are searched)."""
MAX_FLAGGED = 20

PROBED_OPS = frozenset({"==", "!=", "in", "not in"})
"""The comparisons an always-equal value can pass; `is`, `<` and the rest are left alone, as
probing them would only add `__eq__` calls with effects the test can see (pydata/xarray's
test_concat_loads_variables counts the computations of dask arrays it compares with `is`)."""
_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset)
flagged: list[type] = []
"""Types caught comparing equal to anything since the last check (read by the Guard)."""
decided: list[type] = []
"""The candidate's builtin subclasses whose own methods decided a passing comparison that the
builtin's do not (redecide.py), since the last check (read by the Guard)."""
__unittest = True  # unittest leaves frames of this module out of its failure tracebacks


class _Probe:
    """A fresh object that nothing honest compares equal to."""


def install(root: str) -> None:
    """Put the probing `_call_reprcompare` in place of pytest's, send the passing asserts of
    test modules under `root` down pytest's pass path, and wrap unittest's comparing
    assertions (all before the snapshot: they are then pytest's and unittest's functions as
    the guard sees them)."""
    import _pytest.assertion.rewrite as rewrite

    rewrite._call_reprcompare = _probing_reprcompare(rewrite._call_reprcompare)
    beforehand.install(rewrite, root + "/")
    beforehand.after_assert = _after_assert
    original_check = getattr(rewrite, "_check_if_assertion_pass_impl", None)
    if original_check is not None:  # pytest >= 5: the assertion-pass path exists
        rewrite._saferepr = _no_repr_on_pass(rewrite._saferepr)  # type: ignore[assignment]
        rewrite._call_assertion_pass = _ending_pass(rewrite._call_assertion_pass)
        rewrite._check_if_assertion_pass_impl = _pass_path(rewrite, original_check, root + "/")
    _wrap_unittest()


_on_pass = threading.local()
"""`frame`: id() of the test frame whose passing assert the guard sent down the pass path,
until its `_call_assertion_pass` (per thread; an id, so that no frame is kept alive)."""
ON_PASS_REPR = "..."
"""What a value of a passing assert reads as in the explanation nobody reads."""


def _no_repr_on_pass(original: Callable[[object], str]) -> Callable[[object], str]:
    """pytest's `_saferepr`, except for the values of an assert the guard sent down the pass
    path (called from that test frame): no `repr()` there, as without the guard."""
    getframe = sys._getframe

    def _saferepr(obj: object) -> str:
        if getattr(_on_pass, "frame", None) == id(getframe(1)):
            return ON_PASS_REPR
        return original(obj)

    return _saferepr


def _ending_pass(original: Callable[..., None]) -> Callable[..., None]:
    """pytest's pass path, the last call of a passing assert; then the assert's frame is no
    longer on the pass path, and (before Python 3.13) its cached `locals()` is dropped. The
    explanation the pass path builds asks `locals()` of the test function; before 3.13 (PEP
    667) that dict stays on the frame holding every local as it was, so an object the test
    then deletes stays alive (a test that frees an object and checks a weak reference,
    pallets/flask's test_app_freed_on_zero_refcount, would fail only under the guard). Only
    function frames: a module's or class's locals are its namespace; and only a dict nothing
    but the frame holds: a test that kept `locals()` itself (dateutil's test_import_tz_all)
    reads it after the assert. The next `locals()`,
    traceback or debugger fills the dict again from the frame."""
    getframe = sys._getframe
    getrefcount = sys.getrefcount
    forget_locals = sys.version_info < (3, 13)

    def _call_assertion_pass(lineno: int, orig: str, expl: str) -> None:
        try:
            original(lineno, orig, expl)
        finally:
            frame = getframe(1)
            _on_pass.frame = None
            if forget_locals and frame.f_code.co_flags & _CO_OPTIMIZED:
                cached = frame.f_locals
                if getrefcount(cached) <= _HELD_BY_THE_FRAME_ONLY:
                    cached.clear()  # (a dict the test itself kept, `names = locals()`, stays)

    return _call_assertion_pass


_HELD_BY_THE_FRAME_ONLY = 3
"""sys.getrefcount of a frame's cached locals() dict that nothing else holds: the frame, the
name it is read into, getrefcount's own argument."""
_CO_OPTIMIZED = 0x1
"""inspect.CO_OPTIMIZED: the code of a function (fast locals), not of a module or class body."""


def _pass_path(rewrite: Any, original: Callable[[], bool], root: str) -> Callable[[], bool]:
    getframe = sys._getframe
    call_pass = rewrite._call_assertion_pass

    def _check_if_assertion_pass_impl() -> bool:
        """True for an assert in a module of the guarded run (under the workspace), so that
        its operands are probed (its frame is then on the pass path: no repr of its values);
        pytest's own answer elsewhere (a nested run's tmp files), and while a test has
        replaced what the pass path calls (pytest's own tests of that path must see pytest as
        it is without the guard)."""
        _on_pass.frame = None
        if rewrite._call_assertion_pass is not call_pass:
            return original()
        if original():
            return True  # a plugin implementing pytest_assertion_pass: it wants every repr
        try:
            frame = getframe(1)
        except ValueError:
            return False
        if not frame.f_code.co_filename.startswith(root):
            return False
        _on_pass.frame = id(frame)
        return True

    return _check_if_assertion_pass_impl


def _different(value: object) -> object:
    """A value of `value`'s builtin base type that an honest value never equals."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return int(value) + 7919
    if isinstance(value, float):
        return float(value) * 2 + 7919.5 if float(value) == float(value) else 0.5
    if isinstance(value, complex):
        return complex(value) + 7919.5
    if isinstance(value, str):
        return str.__str__(value) + "\x00probe"
    if isinstance(value, bytes):
        return bytes(value) + b"\x00probe"
    return _Probe()


def _equals(value: object, other: object) -> bool:
    with warnings.catch_warnings():  # nothing from a probe reaches the test's warnings
        warnings.simplefilter("ignore")
        try:
            return bool(operator.eq(value, other)) or not bool(operator.ne(value, other))
        except Exception:  # numpy arrays, strict __eq__s: no verdict, nothing held
            return False


def equal_to_anything(value: object, budget: list[int], partner: object = None) -> type | None:
    """The type of a value in `value` (builtin containers are searched, each container once:
    a self-referential dict is no endless search) that says it equals a fresh object, a
    different value of its own builtin base type, or a different value of its `partner`'s type
    (what it was found equal to); else None."""
    seen: set[int] = set()
    stack = [value]
    while stack and budget[0] > 0:
        current = stack.pop()
        kind = type(current)
        if kind in _SCALARS:
            continue
        budget[0] -= 1
        if kind is dict or kind in _CONTAINERS:
            if id(current) in seen:
                continue
            seen.add(id(current))
            if kind is dict:
                parts = [p for pair in current.items() for p in pair]  # type: ignore[attr-defined]
            else:
                parts = list(current)  # type: ignore[call-overload]
            stack.extend(reversed(parts))
            continue
        probes = [_Probe(), _different(current)]
        if current is value and type(partner) in _SCALARS and partner is not None:
            probes.append(_different(partner))
        if any(_equals(current, probe) for probe in probes):
            return kind
    return None


def _flag(found: type) -> None:
    if len(flagged) < MAX_FLAGGED:
        flagged.append(found)


def probe(operands: list[Any]) -> None:
    """Probe the operands of a passing comparison (each against its neighbours). A probe is
    the guard's business: whatever it meets (an exception, a recursion) never reaches the test."""
    try:
        budget = [MAX_PROBED]
        for index, operand in enumerate(operands):
            partners = operands[max(index - 1, 0) : index] + operands[index + 1 : index + 2]
            for partner in partners or [None]:
                found = equal_to_anything(operand, budget, partner)
                if found is not None:
                    _flag(found)
                    break
    except KeyboardInterrupt:
        raise
    except BaseException:  # a probe that cannot finish has no verdict
        pass


def redecide(values: list[Any], holds: Callable[[], object]) -> None:
    """A passing comparison over `values` made again with the candidate's builtin subclasses
    comparing as their builtins (redecide.py); flagged when it then fails."""
    if getattr(_redeciding, "on", False):
        return  # an assertion unittest's own assertion calls while it is made again
    _redeciding.on = True
    try:
        found = decided_by_candidate(values, holds)
    except KeyboardInterrupt:
        raise
    except BaseException:  # the guard's own search failing has no verdict
        return
    finally:
        _redeciding.on = False
    if found is not None and len(decided) < MAX_FLAGGED:
        decided.append(found)


_redeciding = threading.local()
"""`on` while a comparison is being made again (per thread)."""

_COMPARE: dict[str, Callable[[Any, Any], object]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge,
    "in": lambda a, b: a in b, "not in": lambda a, b: a not in b,
}  # fmt: skip
"""The comparisons of a rewritten assert that the operands' own code decides (`is` is not)."""


_ASSERTED_OPS = ("==", "!=", "in", "not in", "<", "<=", ">", ">=")
"""beforehand.COMPARISONS as pytest's explanation names them, in that order."""


def _after_assert(left: Any, right: Any, index: int, result: object) -> None:
    """An assert's own comparison, just made by beforehand.compare: when it holds, made again
    with the candidate's builtin subclasses comparing as their builtins, and its operands
    probed (==, !=, in, not in) — what the pass path does for a passing assert, without
    pytest building the assert's explanation."""
    try:
        if not result:
            return
    except Exception:  # a result with no truth value (an array): pytest raises, no verdict here
        return
    op = _ASSERTED_OPS[index]
    pair = [left, right]
    redecide(pair, functools.partial(_COMPARE[op], *pair))
    if op in PROBED_OPS:
        probe(pair)


def _probing_reprcompare(original: Callable[..., str]) -> Callable[..., str]:
    def _call_reprcompare(ops: Any, results: Any, expls: Any, each_obj: Any) -> str:
        """pytest's explanation of a comparison; on the pass path (every result true) the
        operands are probed instead, and no diff is computed."""
        try:
            passed = all(bool(r) for r in results)
        except Exception:
            passed = False
        if not passed:
            return original(ops, results, expls, each_obj)
        operands = list(each_obj)
        for index, op in enumerate(ops):
            if index + 1 >= len(operands):
                break
            pair = operands[index : index + 2]
            compare = _COMPARE.get(op)
            if compare is not None:
                redecide(pair, functools.partial(compare, *pair))
            if op in PROBED_OPS:
                probe(pair)
        return str(expls[-1]) if expls else ""

    return _call_reprcompare


def _wrap_unittest() -> None:
    import unittest
    import unittest.case

    case = unittest.TestCase
    for name in PROBED_ASSERTS:
        original = case.__dict__.get(name)
        if callable(original):
            setattr(case, name, _probing_assert(original))
    outcome = getattr(unittest.case, "_Outcome", None)
    if outcome is not None and callable(vars(outcome).get("testPartExecutor")):
        outcome.testPartExecutor = _no_false_stop(vars(outcome)["testPartExecutor"])


def _no_false_stop(original: Callable[..., Any]) -> Callable[..., Any]:
    """unittest's `_Outcome.testPartExecutor`, except that its internal `_ShouldStop`, which
    it swallows (the test part ends, still a success), is an error unless a failure came first
    under failfast: unittest raises it only there (`subTest`); raised by the code under test
    it would end a failing test as passed (issue 33, held-out batch 4)."""
    import contextlib
    import unittest.case

    stop = unittest.case._ShouldStop  # type: ignore[attr-defined]

    @contextlib.contextmanager
    def testPartExecutor(self: Any, *args: Any, **kwargs: Any) -> Iterator[None]:
        with original(self, *args, **kwargs):
            try:
                yield
            except stop:
                failfast = getattr(getattr(self, "result", None), "failfast", False)
                if self.success or not failfast:
                    raise RuntimeError(
                        "unittest's internal _ShouldStop was raised while the test had not "
                        "failed (only unittest's subTest raises it, after a failure): the test "
                        "cannot pass that way"
                    ) from None
                raise

    testPartExecutor.__doc__ = original.__doc__
    return testPartExecutor


PROBED_ASSERTS = (
    "assertEqual", "assertAlmostEqual", "assertIn", "assertNotEqual", "assertNotAlmostEqual",
    "assertNotIn", "assertListEqual", "assertTupleEqual", "assertDictEqual", "assertSetEqual",
    "assertSequenceEqual", "assertMultiLineEqual", "assertCountEqual", "assertGreater",
    "assertGreaterEqual", "assertLess", "assertLessEqual",
)  # fmt: skip
"""unittest's assertions between two values: each is made again when the candidate's builtin
subclasses take part (redecide.py); the first three are also probed for always-equal values."""


def _holds(original: Callable[..., Any], case: Any, first: Any, second: Any,
           args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    try:
        original(case, first, second, *args, **kwargs)
    except AssertionError:
        return False
    return True


def _probing_assert(original: Callable[..., Any]) -> Callable[..., Any]:
    def assertion(self: Any, first: Any, second: Any, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True  # pytest leaves this frame out of its tracebacks
        beforehand.before(first, second)
        result = original(self, first, second, *args, **kwargs)
        redecide([first, second], lambda: _holds(original, self, first, second, args, kwargs))
        if original.__name__ in PROBED_ASSERTS[:3]:
            if original.__name__ == "assertIn" and type(second) in _CONTAINERS:
                probe([first, *list(second)[:3]])
            else:
                probe([first, second])
        return result

    assertion.__name__ = original.__name__
    assertion.__qualname__ = getattr(original, "__qualname__", original.__name__)
    assertion.__doc__ = original.__doc__
    assertion.__wrapped__ = original  # type: ignore[attr-defined]
    return assertion
