"""The functions and methods of the test machinery, by name and identity: taken before any
repository code runs, compared before and after every test. One replaced, added (to a class)
or removed is a change, whatever file the new value claims to come from; the Guard decides
which changes are the code under test's.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any

from .toolchain import WATCHED_PACKAGES

DESCRIPTORS = (types.FunctionType, staticmethod, classmethod, property)
GUARD_PACKAGE = __package__ or __name__.rpartition(".")[0]
"""This guard's own package (`_ooda_guard` in the sandbox): watched like pytest."""

Snapshot = dict[tuple[str, str], dict[str, object]]
"""(module, class name or "" for the module itself) -> member name -> the function or method;
for a class, the member "" holds the frozenset of its method names."""


def watched(module_name: str) -> bool:
    """pytest, _pytest, pluggy, and this guard's own modules (its Guard class and helpers)."""
    return (
        module_name.split(".", 1)[0] in WATCHED_PACKAGES
        or module_name == GUARD_PACKAGE
        or module_name.startswith(GUARD_PACKAGE + ".")
    )


def snapshot() -> Snapshot:
    """Every function of the watched modules and every method of their classes, by name; for
    each class also the names of its methods (a method added later overrides an inherited one)."""
    found: Snapshot = {}
    for module_name, module in list(sys.modules.items()):
        if module is None or not watched(module_name):
            continue
        functions: dict[str, object] = {}
        for attr, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
                functions[attr] = value
            elif isinstance(value, type) and value.__module__ == module_name:
                members = {k: v for k, v in vars(value).items() if isinstance(v, DESCRIPTORS)}
                found[(module_name, attr)] = {**members, "": frozenset(members)}
        found[(module_name, "")] = functions
    return found


def _same(now: object, before: object) -> bool:
    """Identical, or a property re-made from the same functions (pytester's inner sessions
    re-apply legacypath's properties)."""
    if now is before:
        return True
    if isinstance(now, property) and isinstance(before, property):
        return now.fget is before.fget and now.fset is before.fset and now.fdel is before.fdel
    return False


def changes(before: Snapshot, suspect: Callable[[object], bool]) -> list[str]:
    """Names of the snapshotted functions and methods that were replaced, removed or added,
    where `suspect(new value)` says the change may come from the code under test. (Run before
    and after every test: each owner's namespace is looked up once, names built only for a
    change.)"""
    changed: list[str] = []
    for (module_name, cls_name), members in before.items():
        module = sys.modules.get(module_name)
        owner: Any = module if not cls_name else getattr(module, cls_name, None)
        prefix = f"{module_name}.{cls_name}" if cls_name else module_name
        if owner is None:
            changed.append(f"{prefix} (removed)")
            continue
        try:
            namespace = vars(owner)
        except TypeError:
            changed.append(prefix)
            continue
        for name, value in members.items():
            if name:
                now = namespace.get(name)
                if not _same(now, value) and suspect(now):
                    changed.append(f"{prefix}.{name}")
                continue
            assert isinstance(value, frozenset)
            added = {
                k
                for k, v in namespace.items()
                if k not in value and isinstance(v, DESCRIPTORS) and suspect(v)
            }
            changed += [f"{prefix}.{k} (added)" for k in sorted(added)]
    return changed
