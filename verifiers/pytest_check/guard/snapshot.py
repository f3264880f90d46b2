"""The functions and methods the tests' verdict goes through, by name and identity: taken before
any repository code runs, compared before and after every test. One replaced, added (to a class)
or removed is a change, whatever file the new value claims to come from; the Guard decides
which changes are the code under test's (plugin.py).

Watched: the test machinery (pytest, `_pytest`, pluggy, unittest, doctest and this guard), and the
standard-library modules that assertions and comparisons go through (`WATCHED_STDLIB`,
and a few builtins). A comparison is cheap: a Fingerprint of the snapshot holds every watched
identity in flat tuples, compared in one pass of C loops (`itemgetter` per namespace, then
`operator.is_` over all of them, ~0.3 ms for 5,000 members); only when something differs
does changes() go namespace by namespace to name what changed.
"""

from __future__ import annotations

import itertools
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

from .toolchain import WATCHED_PACKAGES

_is = operator.is_

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
    """The test machinery (pytest, _pytest, pluggy, unittest, doctest, this guard) and
    WATCHED_STDLIB."""
    top = module_name.split(".", 1)[0]
    return (
        top in WATCHED_PACKAGES
        or top in ("unittest", "doctest")  # (doctest: pytest's doctest items run through it)
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

    __slots__ = (
        "module", "cls", "members", "names", "values", "getter", "size", "module_object",
        "namespace",
    )  # fmt: skip

    def __init__(
        self,
        module: str,
        cls: str,
        members: dict[str, object],
        size: int,
        module_object: object,
        namespace: Any,
    ) -> None:
        self.module = module
        self.module_object = module_object
        """The module itself: `sys.modules[module]` must still be this very object."""
        self.namespace = namespace
        """The module's or class's namespace when taken (a live view: a class's mappingproxy
        and a module's __dict__ stay those objects for as long as the holder lives)."""
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


_taken: dict[tuple[int, str, str], tuple[object, tuple[str, ...], tuple[object, ...], Owner]] = {}
"""(id of the module or class, module name, class name) -> (that module or class, every name
and value of its namespace, the Owner made of it): an Owner is made again only when something
in its namespace changed. The warm interpreter that forks the runs fills it before the fork
(the package's `__warm__`), each run's snapshots after the first reuse their own."""


def _owner(holder: object, module_name: str, cls: str, module: object) -> Owner:
    """The Owner of `holder`'s namespace (a watched module's functions and classes, or a
    class's methods): the one made before when every entry is the same name bound to the
    very same object, else a new one."""
    namespace: Any = vars(holder)
    names, values = tuple(namespace), tuple(namespace.values())
    key = (id(holder), module_name, cls)
    known = _taken.get(key)
    if (
        known is not None
        and known[0] is holder
        and known[3].module_object is module
        and len(known[1]) == len(names)
        and all(map(_is, names, known[1]))  # by identity: a key's __eq__ is not asked
        and all(map(_is, values, known[2]))
    ):
        return known[3]
    members: dict[str, object]
    if cls:
        members = {k: v for k, v in namespace.items() if isinstance(v, DESCRIPTORS)}
        owner = Owner(module_name, cls, members, len(names), module, namespace)
    elif module_name == "builtins":
        members = {k: v for k, v in namespace.items() if k in WATCHED_BUILTINS}
        owner = Owner(module_name, "", members, -1, module, namespace)
    else:
        members = {k: v for k, v in namespace.items() if isinstance(v, (*FUNCTIONS, type))}
        owner = Owner(module_name, "", members, -1, module, namespace)
    _taken[key] = (holder, names, values, owner)
    return owner


def snapshot() -> Snapshot:
    """Every function and class of the watched modules (a class swapped for a look-alike in
    `unittest`'s namespace counts) and every method of the classes they define, by name."""
    found: Snapshot = []
    for module_name, module in list(sys.modules.items()):
        if module is None or not watched(module_name):
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, type) and value.__module__ == module_name:
                found.append(_owner(value, module_name, attr, module))
        found.append(_owner(module, module_name, "", module))
    builtins_module = sys.modules["builtins"]
    found.append(_owner(builtins_module, "builtins", "", builtins_module))
    return found


def retaken(before: Snapshot, unchanged: bool) -> Snapshot:
    """A snapshot of now: `before` itself when nothing it watches changed (`unchanged`: its
    Fingerprint says so), no watched module was imported since and every watched module's
    namespace holds the very entries it held when taken (so no class or function was added to
    one), else snapshot() again. (A class whose non-method entry became a method without
    growing stays watched as taken: nothing of the toolchain's own changed.)"""
    if not unchanged:
        return snapshot()
    owners = {o.module: o for o in before if not o.cls}
    for module_name, module in list(sys.modules.items()):
        if module is not None and module_name not in owners and watched(module_name):
            return snapshot()
    for owner in owners.values():
        holder = owner.module_object
        known = _taken.get((id(holder), owner.module, ""))
        namespace: Any = owner.namespace
        if (
            known is None
            or known[3] is not owner
            or len(namespace) != len(known[1])
            or not all(map(_is, namespace, known[1]))
            or not all(map(_is, namespace.values(), known[2]))
        ):
            return snapshot()
    return before


_call_getter = operator.itemgetter.__call__  # bound now: the code under test may patch operator
_chain = itertools.chain.from_iterable


class Fingerprint:
    """A snapshot's identities in flat tuples, to say in one pass of C loops whether anything
    it watches changed at all (changes() then names what; a test run where nothing changed
    never gets there). Compared by identity: the modules in sys.modules and their types (a
    module's class swapped for one with properties would change what `getattr` finds), every
    member of every namespace, and the size of every class. A module owner's members include
    its classes, so a class replaced in its module is seen there; the namespaces themselves
    are the objects taken with the snapshot (a module's __dict__ and a class's namespace
    cannot be replaced).

    With `grown`, a class that has more entries now than when the snapshot was taken (pytest
    marks a class the first time it makes an item of it) is fingerprinted as it is now, every
    entry by name and identity: changes() has just looked at it, and says the same again for
    as long as the class stays exactly so."""

    __slots__ = ("get_modules", "modules", "types", "getters", "namespaces", "values", "sized",
                 "sizes")  # fmt: skip

    def __init__(self, before: Snapshot, grown: bool = False) -> None:
        module_owners = [o for o in before if not o.cls]
        names = [o.module for o in module_owners]
        self.get_modules = operator.itemgetter(*names, *names[:1])  # always a tuple
        self.modules = (*[o.module_object for o in module_owners], module_owners[0].module_object)
        self.types = tuple(type(m) for m in self.modules)
        getters, namespaces, values, sized, sizes = [], [], [], [], []
        for owner in before:
            keys, members, size = owner.names, owner.values, owner.size
            if grown and size >= 0 and len(owner.namespace) != size:
                keys, members = tuple(owner.namespace), tuple(owner.namespace.values())
                size = len(keys)
            if size >= 0:
                sized.append(owner.namespace)
                sizes.append(size)
            if keys:
                getters.append(operator.itemgetter(*keys, keys[0]))
                namespaces.append(owner.namespace)
                values += [*members, members[0]]
        self.getters, self.namespaces, self.values = tuple(getters), tuple(namespaces), tuple(values)
        self.sized, self.sizes = tuple(sized), tuple(sizes)

    def unchanged(self, sizes: bool = True) -> bool:
        """Nothing the snapshot watches changed (False: ask changes() what did); with `sizes`
        False, nothing but the size of some classes."""
        try:
            modules = self.get_modules(sys.modules)
            values = tuple(_chain(map(_call_getter, self.getters, self.namespaces)))
        except (KeyError, TypeError):
            return False
        return (
            all(map(_is, modules, self.modules))
            and all(map(_is, map(type, modules), self.types))
            and (not sizes or tuple(map(len, self.sized)) == self.sizes)
            and len(values) == len(self.values)
            and all(map(_is, values, self.values))
        )


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
