"""The functions and methods the tests' verdict goes through, by name and identity: taken before
any repository code runs, compared before and after every test. One replaced, added (to a class)
or removed is a change, whatever file the new value claims to come from; the Guard decides
which changes are the code under test's (plugin.py).

Watched: the test machinery (pytest, `_pytest`, pluggy, unittest and this guard), and the
standard-library modules that assertions and comparisons go through (`WATCHED_STDLIB`,
and a few builtins). A comparison is cheap: per class or module, one `itemgetter` call and
an identity check of the values against the snapshot, in C; names are only built for a change.
"""

from __future__ import annotations

import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from .toolchain import WATCHED_PACKAGES

DESCRIPTORS = (types.FunctionType, staticmethod, classmethod, property)
FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType)
GUARD_PACKAGE = __package__ or __name__.rpartition(".")[0]
"""This guard's own package (`_ooda_guard` in the sandbox): watched like pytest."""
WATCHED_STDLIB = frozenset(
    {
        "collections", "copy", "dataclasses", "decimal", "difflib", "filecmp", "fractions",
        "functools", "genericpath", "json", "math", "cmath", "numbers", "operator", "pathlib",
        "posixpath", "pprint", "re", "reprlib",
    }
)  # fmt: skip
"""Standard-library modules whose functions and classes the tests' comparisons use; nobody
replaces them for good (repositories' own patches of them are temporary, inside a test)."""
WATCHED_BUILTINS = frozenset(
    {
        "__build_class__", "__import__", "abs", "all", "any", "ascii", "callable", "dir",
        "divmod", "format", "getattr", "hasattr", "hash", "id", "isinstance", "issubclass",
        "iter", "len", "max", "min", "next", "pow", "repr", "round", "sorted", "sum", "vars",
    }
)  # fmt: skip
"""The builtins an assertion can go through (not print, open or input: tests patch those)."""


def watched(module_name: str) -> bool:
    """The test machinery (pytest, _pytest, pluggy, unittest, this guard) and WATCHED_STDLIB."""
    top = module_name.split(".", 1)[0]
    return (
        top in WATCHED_PACKAGES
        or top == "unittest"
        or module_name in WATCHED_STDLIB
        or module_name == GUARD_PACKAGE
        or module_name.startswith(GUARD_PACKAGE + ".")
    )


def machinery(module_name: str) -> bool:
    """pytest, _pytest, pluggy and this guard: where even another function of the same
    machinery put in a function's place is a change that counts."""
    top = module_name.split(".", 1)[0]
    return top in WATCHED_PACKAGES or module_name == GUARD_PACKAGE or (
        module_name.startswith(GUARD_PACKAGE + ".")
    )


class Owner:
    """One snapshotted namespace: a module's functions or a class's methods."""

    __slots__ = ("module", "cls", "members", "names", "values", "getter", "size", "module_object")

    def __init__(
        self, module: str, cls: str, members: dict[str, object], size: int, module_object: object
    ) -> None:
        self.module = module
        self.module_object = module_object
        """The module itself: `sys.modules[module]` must still be this very object."""
        self.cls = cls
        self.members = members
        self.names = tuple(members)
        self.values = tuple(members.values())
        self.getter: Callable[[Any], Any] = (
            operator.itemgetter(*self.names) if self.names else operator.itemgetter
        )
        self.size = size
        """len(vars(class)) when taken (-1 for a module): a class that grew may have a new
        method."""

    @property
    def prefix(self) -> str:
        return f"{self.module}.{self.cls}" if self.cls else self.module

    def unchanged(self, namespace: Any) -> bool:
        """Every member still the very same object (compared by identity, never by `==`: a
        replacement may claim to equal anything), and a class no larger than it was."""
        if self.size >= 0 and len(namespace) != self.size:
            return False
        if not self.names:
            return True
        try:
            now = self.getter(namespace)
        except KeyError:
            return False
        if len(self.names) == 1:
            return now is self.values[0]
        return all(map(operator.is_, now, self.values))


Snapshot = list[Owner]


def snapshot() -> Snapshot:
    """Every function and class of the watched modules (a class swapped for a look-alike in
    `unittest`'s namespace counts) and every method of the classes they define, by name."""
    found: Snapshot = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not watched(module_name):
            continue
        functions: dict[str, object] = {}
        for attr, value in list(vars(module).items()):
            if isinstance(value, (*FUNCTIONS, type)):
                functions[attr] = value
            if isinstance(value, type) and value.__module__ == module_name:
                namespace = vars(value)
                members: dict[str, object] = {
                    k: v for k, v in namespace.items() if isinstance(v, DESCRIPTORS)
                }
                found.append(Owner(module_name, attr, members, len(namespace), module))
        found.append(Owner(module_name, "", functions, -1, module))
    builtins_module = sys.modules["builtins"]
    functions = {k: v for k, v in vars(builtins_module).items() if k in WATCHED_BUILTINS}
    found.append(Owner("builtins", "", functions, -1, builtins_module))
    return found


def _same(now: object, before: object) -> bool:
    """Identical, or a property re-made from the same functions (pytester's inner sessions
    re-apply legacypath's properties)."""
    if now is before:
        return True
    if type(now) is property and type(before) is property:
        return now.fget is before.fget and now.fset is before.fset and now.fdel is before.fdel
    return False


def changes(before: Snapshot, suspect: Callable[[Owner, str, object], bool]) -> list[str]:
    """Names of the snapshotted functions and methods that were replaced, removed or added,
    where `suspect(owner, name, new value)` says the change may come from the code under
    test."""
    changed: list[str] = []
    for owner in before:
        module = sys.modules.get(owner.module)
        if module is not owner.module_object and not owner.cls:
            changed.append(f"sys.modules[{owner.module!r}]")
        holder: Any = module if not owner.cls else getattr(module, owner.cls, None)
        if holder is None:
            changed.append(f"{owner.prefix} (removed)")
            continue
        try:
            namespace = vars(holder)
        except TypeError:
            changed.append(owner.prefix)
            continue
        if owner.unchanged(namespace):
            continue
        for name, value in owner.members.items():
            now = namespace.get(name)
            if not _same(now, value) and suspect(owner, name, now):
                changed.append(f"{owner.prefix}.{name}")
        if owner.size >= 0:
            added = sorted(
                k
                for k, v in namespace.items()
                if k not in owner.members and isinstance(v, DESCRIPTORS) and suspect(owner, k, v)
            )
            changed += [f"{owner.prefix}.{k} (added)" for k in added]
    return changed
