"""The always-equal probe: every comparison of a passing rewritten `assert` goes through
pytest's assertion-pass path (`-o enable_assertion_pass_hook=true`), where pytest's
`_call_reprcompare` is given the operands; the guard's version probes them instead of
formatting a diff. An operand that is not a plain builtin value and compares equal to a fresh
object, or to a different value of its own builtin base type, has an `__eq__` that does not
compare values; the Guard decides whether that is the candidate's doing.
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable
from typing import Any

MAX_PROBED = 1000
"""Most values looked at per comparison (builtin containers are searched)."""
MAX_FLAGGED = 20

_SCALARS = (int, float, complex, str, bytes, bool, type(None))
_CONTAINERS = (list, tuple, set, frozenset)
flagged: list[type] = []
"""Types caught comparing equal to anything since the last check (read by the Guard)."""


class _Probe:
    """A fresh object that nothing honest compares equal to."""


def install() -> None:
    """Put the probing `_call_reprcompare` in place of pytest's (before the snapshot: it is
    then pytest's function as the guard sees it)."""
    import _pytest.assertion.rewrite as rewrite

    rewrite._call_reprcompare = _probing_reprcompare(rewrite._call_reprcompare)


def _different(value: object) -> object:
    """A value of `value`'s builtin base type that an honest subclass never equals."""
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


def equal_to_anything(value: object, budget: list[int]) -> type | None:
    """The type of a value in `value` (builtin containers are searched) that says it equals a
    fresh object, or a different value of its builtin base type; else None."""
    kind = type(value)
    if kind in _SCALARS or budget[0] <= 0:
        return None
    budget[0] -= 1
    if isinstance(value, dict) and kind is dict:
        parts: list[object] = [p for pair in value.items() for p in pair]
    elif kind in _CONTAINERS:
        parts = list(value)  # type: ignore[call-overload]
    else:
        with warnings.catch_warnings():  # nothing from a probe reaches the test's warnings
            warnings.simplefilter("ignore")
            for probe in (_Probe(), _different(value)):
                try:
                    if bool(operator.eq(value, probe)) or not bool(operator.ne(value, probe)):
                        return kind
                except Exception:  # numpy arrays, strict __eq__s: no verdict, nothing held
                    continue
        return None
    for part in parts:
        found = equal_to_anything(part, budget)
        if found is not None:
            return found
    return None


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
        budget = [MAX_PROBED]
        for operand in list(each_obj):
            found = equal_to_anything(operand, budget)
            if found is not None and len(flagged) < MAX_FLAGGED:
                flagged.append(found)
        return str(expls[-1]) if expls else ""

    return _call_reprcompare
