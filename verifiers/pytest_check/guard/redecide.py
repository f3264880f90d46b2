"""Comparisons the candidate's own code decided, re-decided by the builtin it pretends to be.

A value of a class the candidate made (by provenance: its body ran from a changed file, a file
written during the run, or code made at run time) that derives from a builtin (`int`, `str`,
`tuple`, `dict`...) and overrides that builtin's comparisons, arithmetic or container methods
can make any assertion about it pass: an `__eq__` that binds to the first value it meets and
then compares honestly answers every later probe like an honest value. Probing its behaviour
afterwards cannot tell; its class can. So a passing comparison (a rewritten `assert`, unittest's
comparing assertions) whose operands hold such a value, inside builtin containers or in the
attributes of other objects, is evaluated once more with those classes' overriding methods
replaced by the builtin's own (`int.__eq__` on the int's own data: no code of the candidate's
runs), and restored at once. The search goes breadth first through up to MAX_VALUES distinct
containers and objects (scalars are not counted) and MAX_OBJECT_DEPTH levels of objects. If the comparison then fails, the candidate's code decided it.

Classes the candidate did not make (the repository's unchanged code, the tests' own wildcards,
`numpy.float64`, `enum.IntEnum`) keep their own comparisons. What this does not see is said in
docs/SECURITY.md: a class that is not a builtin's subclass decides its own equality (only the
always-equal probe looks at it), and comparisons outside an assert statement are not seen.
"""

from __future__ import annotations

import collections
import itertools
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

BUILTINS: tuple[type, ...] = (
    bool, int, float, complex, str, bytes, bytearray, tuple, list, dict, set, frozenset,
)  # fmt: skip
_BUILTIN_SET = frozenset(BUILTINS)
_SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})
REPLACED = frozenset(
    {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__contains__", "__len__",
     "__iter__", "__getitem__", "__bool__", "__abs__", "__neg__", "__pos__", "__round__",
     "__int__", "__float__", "__complex__", "__index__", "__str__", "__bytes__",
     "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
     "__rtruediv__", "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__",
     "__rpow__", "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__",
     "keys", "values", "items", "get", "count", "index", "startswith", "endswith", "lower",
     "upper", "strip", "split"}
)  # fmt: skip
"""Methods of a builtin that a subclass overriding them could use to decide a comparison made
in a test (directly, or through `pytest.approx`, unittest's assertions, `str.lower()` ...)."""
MAX_VALUES = 20_000
"""Most distinct containers and objects looked at per comparison (values of the builtin scalar
types themselves are not counted: a list of a million ints is looked through, item by item up
to MAX_ITEMS, at the cost of one type check each)."""
MAX_ITEMS = 200_000
"""Most items read from one container."""
_IDENTITY = object.__eq__
MAX_OBJECT_DEPTH = 3
"""How deep into objects' attributes (not builtin containers) the search goes."""

def _nobody(cls: type, name: str, value: object) -> bool:
    return False


candidate_override: Callable[[type, str, object], bool] = _nobody
"""Whether a class's own attribute `value` is the candidate's doing: a class the candidate made,
or a function of its code assigned there (set by the Guard, from trust.Judge)."""


def builtin_base(kind: type) -> type | None:
    """The builtin a class derives from (None for a builtin itself or any other class)."""
    if kind in _BUILTIN_SET:
        return None
    for cls in kind.__mro__[1:]:
        if cls in _BUILTIN_SET:
            return cls
    return None


def _overrides(kind: type) -> list[tuple[type, str, object]]:
    """(class, name, builtin's own attribute) for each method the candidate's classes in
    `kind`'s MRO define over their builtin base's."""
    base = builtin_base(kind)
    if base is None:
        return []
    found = []
    for cls in kind.__mro__:
        if cls is base:
            break
        own = cls.__dict__
        for name in [n for n in own if n in REPLACED and hasattr(base, n)]:
            if candidate_override(cls, name, own[name]):
                found.append((cls, name, getattr(base, name)))
    return found


def _dict_of(value: object) -> dict[str, object] | None:
    """An object's instance dictionary, read without running any code of its class (None when
    its `__dict__` is not the standard one)."""
    for cls in type(value).__mro__:
        descriptor = cls.__dict__.get("__dict__")
        if descriptor is not None:
            if type(descriptor) is not types.GetSetDescriptorType:
                return None
            try:
                found = descriptor.__get__(value, type(value))
            except Exception:
                return None
            return found if type(found) is dict else None
    return None


def _slots_of(value: object) -> list[object]:
    """The values of an object's `__slots__` (member descriptors: no code of its class)."""
    found = []
    for cls in type(value).__mro__:
        for member in list(cls.__dict__.values()):
            if type(member) is types.MemberDescriptorType:
                try:
                    found.append(member.__get__(value, type(value)))
                except AttributeError:
                    continue
    return found


def _parts(value: object, kind: type) -> Iterable[object]:
    """A builtin container's items, read through the builtin (not the subclass's methods)."""
    if kind is list or kind is tuple:  # (the usual case: the builtin's own slicing)
        return value[:MAX_ITEMS]  # type: ignore[index, no-any-return]
    if issubclass(kind, dict):
        items: Iterable[tuple[object, object]] = dict.items(value)  # type: ignore[arg-type]
        return list(itertools.chain.from_iterable(itertools.islice(items, MAX_ITEMS)))
    if issubclass(kind, (list, tuple, set, frozenset)):
        base: Any = next(c for c in kind.__mro__ if c in (list, tuple, set, frozenset))
        return list(itertools.islice(base.__iter__(value), MAX_ITEMS))
    return ()


def values_in(values: Iterable[object], max_values: int = MAX_VALUES) -> Iterator[object]:
    """Each distinct value that is not a builtin scalar in `values`, inside builtin containers
    (read through the builtin) and other objects' attributes, breadth first, up to MAX_VALUES
    values, MAX_ITEMS items of one container and MAX_OBJECT_DEPTH levels of objects; no code
    of the values' classes runs."""
    seen: set[int] = set()
    stack = collections.deque((v, 0) for v in values)
    count = 0
    while stack and count < max_values:
        value, depth = stack.popleft()
        kind = type(value)
        if kind in _SCALARS:
            continue
        if id(value) in seen:
            continue
        seen.add(id(value))
        count += 1
        yield value
        if issubclass(kind, (dict, list, tuple, set, frozenset)):
            parts = _parts(value, kind)
            if not _SCALARS.issuperset(map(type, parts)):  # (a container of scalars: one C pass)
                stack.extend([(p, depth) for p in parts if type(p) not in _SCALARS])
        elif (
            depth < MAX_OBJECT_DEPTH
            and not isinstance(value, (type, types.ModuleType))
            and kind.__eq__ is not _IDENTITY  # (compared by identity: its attributes never are)
        ):
            attributes = _dict_of(value)
            if attributes is not None:
                stack.extend((v, depth + 1) for v in list(attributes.values()))
            stack.extend((v, depth + 1) for v in _slots_of(value))


def suspects(values: Iterable[object]) -> list[tuple[type, str, object]]:
    """The overriding methods of the candidate's builtin subclasses whose instances `values`
    hold (values_in)."""
    found: list[tuple[type, str, object]] = []
    seen_types: set[type] = set()
    for value in values_in(values):
        kind = type(value)
        if kind not in seen_types:
            seen_types.add(kind)
            if builtin_base(kind) is not None:
                found.extend(_overrides(kind))
    return found


def decided_by_candidate(values: Iterable[object], holds: Callable[[], object]) -> type | None:
    """The candidate's class that decided a passing comparison over `values`: `holds()` (the
    comparison made again) no longer holds with the builtin's own methods in place of its
    overriding ones; else None (no such class, or the comparison holds, or cannot be made)."""
    found = suspects(values)
    if not found:
        return None
    restore: list[tuple[type, str, object]] = []
    try:
        for cls, name, builtin in found:
            original = cls.__dict__[name]
            try:
                type.__setattr__(cls, name, builtin)
            except (TypeError, AttributeError):  # a class that cannot be changed
                continue
            restore.append((cls, name, original))
        try:
            result = bool(holds())
        except KeyboardInterrupt:
            raise
        except BaseException:  # the builtin's own comparison refuses (a type error): it fails
            result = False
    finally:
        for cls, name, original in reversed(restore):
            try:
                type.__setattr__(cls, name, original)
            except (TypeError, AttributeError):
                pass
    return None if result else found[0][0]
