"""The guard's probes never change a legitimate outcome (issue 34): a self-referential container,
a value whose `__eq__` raises or exits, a deep structure are the guard's business, never an
exception in the test; a comparison the candidate's builtin subclass decided is made again
with the builtin's own methods (redecide.py, issue 33); and a value whose comparison is the
candidate's is asked, before an assert compares it, whether it equals values it was never given
(beforehand.py: a plain class that binds to the first value it meets, issue 33's held-out A1)."""

from __future__ import annotations

import ast
import random
from pathlib import Path
from typing import Any

import pytest

from ooda.verifiers.pytest_check.guard import beforehand, probes, redecide


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    probes.flagged.clear()
    probes.decided.clear()
    beforehand.flagged.clear()
    beforehand._verdicts.clear()
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


class Remembers:
    """Binds to the first value it is compared with, then compares honestly with it."""

    def __eq__(self, other: object) -> bool:
        bound = self.__dict__.setdefault("bound", other)
        return bool(bound == other)

    __hash__ = object.__hash__


def test_a_remembering_value_is_asked_before_the_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(beforehand, "_urandom", random.Random(33).randbytes)
    value = Remembers()
    beforehand.before(value, 5)
    assert beforehand.flagged == [Remembers]
    assert value != 5  # bound to the probe: the test's own comparison fails too
    beforehand.flagged.clear()
    beforehand.before({"total": [Remembers()]}, {"total": [5]})
    assert beforehand.flagged == [Remembers]

    class BindsToPlausibleInts:  # ignores anything but an int, and its first four
        def __init__(self) -> None:
            self.met = 0

        def __eq__(self, other: object) -> bool:
            if type(other) is not int:
                return False
            self.met += 1
            if self.met > 4:
                self.__dict__.setdefault("bound", other)
            return bool(self.__dict__.get("bound", other) == other) and self.met > 4

        __hash__ = object.__hash__

    class Own:  # the repository's record type, holding the value in an attribute
        def __init__(self, value: object) -> None:
            self.value = value

        def __eq__(self, other: object) -> bool:  # (compares it: so the value is looked at)
            return bool(self.value == getattr(other, "value", other))

        __hash__ = object.__hash__

    class OrdersByMemory:  # `assert total >= 5` and `<= 5`, with an honest __eq__
        def __ge__(self, other: int) -> bool:
            return bool(self.__dict__.setdefault("bound", other) >= other)

        def __le__(self, other: int) -> bool:
            return bool(self.__dict__.setdefault("bound", other) <= other)

    beforehand.flagged.clear()
    beforehand.before(OrdersByMemory(), 5)
    assert beforehand.flagged == [OrdersByMemory]

    caught = 0
    for _ in range(10):
        beforehand.flagged.clear()
        beforehand.before(Own(BindsToPlausibleInts()), Own(5))
        caught += beforehand.flagged == [BindsToPlausibleInts]
    assert caught >= 5  # found in the record's attributes

    wins = 0
    for _ in range(40):  # the probes repeat a random number of times: it rarely guesses right
        beforehand.flagged.clear()
        binder = BindsToPlausibleInts()
        beforehand.before(Own(binder), Own(5))
        wins += not beforehand.flagged and binder == 5
    assert wins <= 15  # (1 in 8 expected)


def test_a_value_comparing_by_its_state_or_a_trusted_wildcard_is_left_alone() -> None:
    class Counted:
        def __init__(self, value: int) -> None:
            self.value, self.compared = value, 0

        def __eq__(self, other: object) -> bool:
            self.compared += 1
            return bool(self.value == getattr(other, "value", other))

        def __le__(self, other: Any) -> bool:
            return bool(self.value <= getattr(other, "value", other))

        def __ge__(self, other: Any) -> bool:
            return bool(self.value >= getattr(other, "value", other))

        __hash__ = object.__hash__

    class Own:  # a wildcard the candidate did not make (as mock.ANY)
        def __eq__(self, other: object) -> bool:
            return True

    class Five(int):
        def __eq__(self, other: object) -> bool:
            return int(self) == other

        __hash__ = int.__hash__

    class Six:  # its number is nowhere the guard can see it (as a sympy Integer's)
        def __eq__(self, other: object) -> bool:
            return other == 6

        __hash__ = object.__hash__

    honest = Counted(5)
    for _ in range(50):  # probes are kept clear of every value the comparison holds
        beforehand.before(Six(), 5)  # (`assert S(6) != 5`: a close probe would be 6)
        beforehand.before(honest, 5)
        beforehand.before([honest], (Own(), 5))
        beforehand.before(honest, 4)  # (`assert total != 4`, `assert total >= 4`)
        beforehand.before([Counted(5), Counted(2), Five(6)], [5, 3, 7])  # a failing assert
    assert beforehand.flagged == []
    assert honest == 5


def test_every_comparison_of_a_rewritten_module_is_probed_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from _pytest.assertion import rewrite

    monkeypatch.setattr(rewrite, beforehand.HELPER, beforehand.compare, raising=False)
    run = beforehand._instrumented(rewrite.AssertionRewriter.run, f"{tmp_path}/")
    monkeypatch.setattr(rewrite.AssertionRewriter, "run", run)
    source = (
        "def check(value):\n"
        "    assert value == 5 and 1 in [1] and 2 not in [1] and not (3 < 2)\n"
        "    assert value is not None\n"
        "def outside(value):\n"
        "    ok = value == 5\n"
        "    assert ok\n"
        "def in_a_generator(values):\n"
        "    assert all(v == 5 for v in values)\n"
        "def in_an_or(value):\n"  # pytest puts `value == 5` under an `if not`: still probed
        "    assert value is None or value == 5\n"
    )
    names: dict[str, Any] = {}
    tree = ast.parse(source)
    rewrite.rewrite_asserts(tree, source.encode(), str(tmp_path / "test_x.py"))
    exec(compile(tree, str(tmp_path / "test_x.py"), "exec"), names)  # noqa: S102
    names["check"](5)
    names["outside"](5)
    names["in_a_generator"]([5, 5])
    names["in_an_or"](5)
    assert beforehand.flagged == []
    for name, value in (("check", Remembers()), ("outside", Remembers()),
                        ("in_a_generator", [Remembers()]), ("in_an_or", Remembers())):
        beforehand.flagged.clear()
        with pytest.raises(AssertionError):
            names[name](value)
        assert beforehand.flagged == [Remembers], name
    elsewhere = ast.parse(source)  # a module outside the run's root is rewritten as pytest does
    rewrite.rewrite_asserts(elsewhere, source.encode(), "/elsewhere/test_x.py")
    assert beforehand.HELPER not in ast.dump(elsewhere)


def test_a_module_below_a_comment_or_docstring_still_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """attrs' tests/conftest.py (a licence comment, then imports) failed to load under the
    guard: "AST node line range (3, 1) is not valid" (bench/guard_overhead.py --fidelity)."""
    from _pytest.assertion import rewrite

    monkeypatch.setattr(rewrite, beforehand.HELPER, beforehand.compare, raising=False)
    run = beforehand._instrumented(rewrite.AssertionRewriter.run, f"{tmp_path}/")
    monkeypatch.setattr(rewrite.AssertionRewriter, "run", run)
    for source in ("# SPDX-License-Identifier: MIT\n\nimport os\n\nSKIP = []\nif not SKIP:\n"
                   "    SKIP.append(os.sep)\n",
                   '"""Tests."""\nimport os\n\n\ndef test_sep():\n    ok = os.sep == "/"\n'
                   '    assert ok and os.sep == "/"\n'):
        tree = ast.parse(source)
        rewrite.rewrite_asserts(tree, source.encode(), str(tmp_path / "conftest.py"))
        names: dict[str, Any] = {}
        exec(compile(tree, str(tmp_path / "conftest.py"), "exec"), names)  # noqa: S102
        if "test_sep" in names:
            names["test_sep"]()
