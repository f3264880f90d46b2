"""The guard's probes never change a legitimate outcome (issue 34): a self-referential container,
a value whose `__eq__` raises or exits, a deep structure are the guard's business, never an
exception in the test; and a comparison the candidate's builtin subclass decided is made again
with the builtin's own methods (redecide.py, issue 33)."""

from __future__ import annotations

from typing import Any

import pytest

from ooda.verifiers.pytest_check.guard import probes, redecide


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    probes.flagged.clear()
    probes.decided.clear()
    monkeypatch.setattr(redecide, "candidate_override", lambda cls, name, value: cls.__name__ != "Own")


def test_a_self_referential_dict_is_probed_without_recursion() -> None:
    target: dict[str, Any] = {}
    target["a"] = target
    probes.probe([target, target])
    nested: list[Any] = []
    for _ in range(5000):
        nested = [nested]
    probes.probe([nested, nested])
    assert probes.flagged == []


class Raising:
    def __eq__(self, other: object) -> bool:
        if isinstance(other, Raising):
            return True
        raise SystemExit("a strict __eq__")

    __hash__ = object.__hash__


def test_a_probe_that_raises_is_never_the_tests_exception() -> None:
    probes.probe([Raising(), Raising()])
    probes.redecide([Raising()], lambda: True)
    assert probes.flagged == [] and probes.decided == []


class Sticky(int):
    def __eq__(self, other: object) -> bool:
        return bool(self.__dict__.setdefault("bound", other) == other)

    __hash__ = int.__hash__


class Own(int):
    """The same override in a class the candidate did not make (a trusted one)."""

    def __eq__(self, other: object) -> bool:
        return bool(self.__dict__.setdefault("bound", other) == other)

    __hash__ = int.__hash__


def test_a_builtin_subclass_of_the_candidates_is_compared_as_its_builtin() -> None:
    value = Sticky(1)
    assert value == 5  # binds
    probes.redecide([value, 5], lambda: value == 5)
    assert probes.decided == [Sticky]
    assert value.__class__.__dict__["__eq__"] is Sticky.__dict__["__eq__"]  # restored
    probes.decided.clear()
    probes.redecide([{"k": [(value,)]}, {"k": [(5,)]}], lambda: {"k": [(value,)]} == {"k": [(5,)]})
    assert probes.decided == [Sticky]


def test_an_honest_comparison_and_a_trusted_class_are_left_alone() -> None:
    honest = Sticky(5)
    assert honest == 5
    probes.redecide([honest, 5], lambda: honest == 5)
    trusted = Own(1)
    assert trusted == 5
    probes.redecide([trusted, 5], lambda: trusted == 5)
    assert probes.decided == []


def test_a_value_held_in_an_objects_attributes_is_found() -> None:
    class Box:
        def __init__(self, inner: object) -> None:
            self.inner = inner

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Box) and self.inner == other.inner

    value = Sticky(2)
    assert Box(value) == Box(7)
    probes.redecide([Box(value), Box(7)], lambda: Box(value) == Box(7))
    assert probes.decided == [Sticky]
