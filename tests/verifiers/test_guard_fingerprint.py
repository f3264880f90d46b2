"""The guard's quick check of its snapshot (verifiers/pytest_check/guard/snapshot.py,
Fingerprint): it must say "changed" whenever the full comparison would find something, also
after a class grew harmlessly and the quick check was re-taken over the grown class."""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator

import pytest

from ooda.verifiers.pytest_check.guard.snapshot import Fingerprint, changes, retaken, snapshot


class _Marker:
    """A class of the watched `unittest` namespace, made for these tests only."""

    def method(self) -> int:
        return 1


@pytest.fixture
def watched_class() -> Iterator[type]:
    module = types.ModuleType("unittest._ooda_fingerprint_probe")
    _Marker.__module__ = module.__name__
    module._Marker = _Marker  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    try:
        yield _Marker
    finally:
        del sys.modules[module.__name__]
        for name in ("grown", "helper"):
            if name in vars(_Marker):
                delattr(_Marker, name)


def _everything(owner: object, name: str, value: object) -> bool:
    return True


def test_nothing_changed_is_unchanged(watched_class: type) -> None:
    taken = snapshot()
    assert Fingerprint(taken).unchanged()
    assert changes(taken, _everything) == []


def test_a_replaced_method_or_module_is_a_change(watched_class: type) -> None:
    taken = snapshot()
    original = watched_class.method  # type: ignore[attr-defined]
    watched_class.method = lambda self: 2  # type: ignore[attr-defined]
    try:
        assert not Fingerprint(taken).unchanged()
        assert changes(taken, _everything) == [f"{watched_class.__module__}._Marker.method"]
    finally:
        watched_class.method = original  # type: ignore[attr-defined]
    assert Fingerprint(taken).unchanged()
    name = watched_class.__module__
    module = sys.modules[name]
    sys.modules[name] = types.ModuleType(name)
    try:
        assert not Fingerprint(taken).unchanged()
    finally:
        sys.modules[name] = module


def test_a_grown_class_is_looked_at_again_whenever_it_changes(watched_class: type) -> None:
    taken = snapshot()
    watched_class.grown = True  # type: ignore[attr-defined]  # pytest marks classes so
    quick = Fingerprint(taken)
    assert not quick.unchanged()
    assert quick.unchanged(sizes=False)  # only a size differs
    assert changes(taken, _everything) == []  # not a descriptor: nothing to say
    regrown = Fingerprint(taken, grown=True)
    assert regrown.unchanged()
    # same size, the harmless entry swapped for a method: the quick check must see it
    del watched_class.grown  # type: ignore[attr-defined]
    watched_class.helper = lambda self: 3  # type: ignore[attr-defined]
    assert not regrown.unchanged()
    assert changes(taken, _everything) == [f"{watched_class.__module__}._Marker.helper (added)"]


def test_a_snapshot_reuses_only_namespaces_that_did_not_change(watched_class: type) -> None:
    """snapshot() makes an Owner again for a namespace any of whose names is now bound to
    another object, or that has a name more or less; an unchanged one keeps its Owner (the
    warm interpreter's snapshots serve the runs it forks)."""
    module_name = watched_class.__module__

    def owners() -> dict[str, object]:
        return {o.prefix: o for o in snapshot() if o.module == module_name}

    first = owners()
    assert owners() == first  # nothing changed: the very same Owners
    before = first[f"{module_name}._Marker"]

    def other(self: object) -> int:
        return 2

    original = watched_class.method  # type: ignore[attr-defined]
    watched_class.method = other  # type: ignore[attr-defined]
    try:
        changed = owners()
        assert changed[f"{module_name}._Marker"] is not before
        assert changed[f"{module_name}._Marker"].members["method"] is other  # type: ignore[attr-defined]
        assert changed[module_name] is first[module_name]  # the module's own names did not change
    finally:
        watched_class.method = original  # type: ignore[attr-defined]
    watched_class.extra = 1  # type: ignore[attr-defined]
    try:
        assert owners()[f"{module_name}._Marker"] is not before  # a name more
    finally:
        del watched_class.extra  # type: ignore[attr-defined]
    module = sys.modules[module_name]
    name = "".join(["_", "Marker"])  # an equal string, not the same object
    del module.__dict__["_Marker"]
    module.__dict__[name] = watched_class
    assert owners()[module_name] is not first[module_name]


def test_a_reference_is_retaken_only_when_a_snapshot_now_would_differ(watched_class: type) -> None:
    """The guard's reference after pytest configured (retaken): the same snapshot when nothing
    it watches changed, no watched module was imported and no watched module's namespace
    gained or lost an entry; a new snapshot otherwise, which watches what was added."""
    taken = snapshot()
    assert retaken(taken, Fingerprint(taken).unchanged()) is taken
    module = sys.modules[watched_class.__module__]

    def added() -> int:
        return 1

    module.added = added  # type: ignore[attr-defined]
    try:
        assert Fingerprint(taken).unchanged()  # not a change of what it watches ...
        again = retaken(taken, True)  # ... but a snapshot now watches it
        assert again is not taken
        assert any(o.module == module.__name__ and "added" in o.members for o in again)
    finally:
        del module.added
    imported = types.ModuleType("unittest._ooda_fingerprint_imported")
    sys.modules[imported.__name__] = imported
    try:
        assert retaken(taken, True) is not taken
    finally:
        del sys.modules[imported.__name__]
    assert retaken(taken, False) is not taken  # a change it watches: snapshot() again
