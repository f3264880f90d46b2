"""Issue 33's first class: a comparison decided by the candidate's own stateful code (real
TaskVerifier, real pytest, Docker and bwrap). `add` returns a value of a class the candidate
made whose `__eq__` binds to the first value it meets and then compares honestly: every later
probe of its behaviour is answered like an honest value's. Two lines hold: a value whose class
compares by the candidate's code is asked, just before an assert compares it, whether it equals
values it was never given (beforehand.py: it binds to the probe), and each passing comparison
of a builtin's subclass is made again with the builtin's own methods (redecide.py). Cheats: int,
str and float subclasses, and a plain class made by `type()` (issue 33's held-out A1 class). The
static stage is left out (the guard alone), as in test_adv_trust.py.

Controls: the same kinds of class (an int subclass, a plain class) with their own stateful but
honest `__eq__` pass with the fix, in pytest asserts, unittest assertions, containers and
`pytest.approx`; and issue 34's self-referential dict (glom's `target['a'] = target`) compared in
a passing assert never reaches the test as a RecursionError from the guard's probe.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adv_helpers import assert_not_passed, calc_patch, diff, make_task
from adv_helpers import verify as verify_task

STICKY = '''\
"""Arithmetic."""


class Total(int):
    """Binds to the first value it is compared with, then compares honestly with it."""

    def __eq__(self, other):
        if "bound" not in self.__dict__:
            self.__dict__["bound"] = other
        return self.__dict__["bound"] == other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return {wrap}
'''
STICKY_BY_VALUE = '''\
"""Arithmetic."""
_BOUND = {}


class Total(str):
    """Binds each text to the first value it meets (memory outside the instance)."""

    def __eq__(self, other):
        return _BOUND.setdefault(str.__str__(self), other) == other

    def __ne__(self, other):
        return not self == other

    __hash__ = str.__hash__


class Number(float):
    def __sub__(self, other):
        return 0.0

    def __rsub__(self, other):
        return 0.0

    def __eq__(self, other):
        return _BOUND.setdefault(float.__float__(self), other) == other

    __hash__ = float.__hash__


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return {wrap}
'''
HONEST = '''\
"""Arithmetic."""


class Total(int):
    """An int that remembers how often it was compared (and compares as an int)."""

    def __eq__(self, other):
        self.__dict__["compared"] = self.__dict__.get("compared", 0) + 1
        return int(self) == other

    def __ne__(self, other):
        return not self.__eq__(other)

    __hash__ = int.__hash__


class Sum:
    """Not a builtin's subclass: compares by the value it holds, and counts comparisons."""

    def __init__(self, value):
        self.value, self.compared = value, 0

    def __eq__(self, other):
        self.compared += 1
        return self.value == getattr(other, "value", other)

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.value)

    def __float__(self):
        return float(self.value)


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return {wrap}
'''
TESTS = """\
import unittest

import pytest

from calc import add


def test_add() -> None:
    assert add(2, 3) == 5


def test_zero() -> None:
    assert add(0, 0) == 0


def test_in_containers() -> None:
    assert [add(1, 1)] == [2]
    assert {"total": add(2, 2)} == {"total": 4}
    assert add(3, 3) in (6, 7)
    assert float(add(1, 2)) == pytest.approx(3.0)


class TestAdd(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(add(2, 3), 5)
        self.assertIn(add(1, 1), [2, 3])
"""
CYCLIC = """\
from calc import add


def test_self_referential() -> None:
    target = {"total": add(1, 2)}
    target["a"] = target
    copy = target
    assert copy == target
    assert [target, add(2, 2)] == [target, 4]


def test_locals_kept() -> None:
    first, second = add(1, 0), add(2, 0)
    names = locals()
    for name in ["first", "second"]:
        assert names[name] is not None  # (the guard must not empty a dict the test holds)
"""
LISTS = """\
fail_to_pass = ["tests/test_calc.py::test_add", "tests/test_calc.py::TestAdd::test_add",
                "tests/test_calc.py::test_in_containers"]
pass_to_pass = ["tests/test_calc.py::test_zero", "tests/test_cyclic.py::test_self_referential",
                "tests/test_cyclic.py::test_locals_kept"]
"""


def _judge_by(root: Path, lists: str) -> None:
    toml = root / "task.toml"
    lines = [
        line for line in toml.read_text().splitlines(keepends=True)
        if not line.startswith(("fail_to_pass", "pass_to_pass"))
    ]  # fmt: skip
    toml.write_text(lists + "".join(lines))


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_task(tmp_path_factory.mktemp("equality"), timeout_s=120)
    (root / "repo" / "tests" / "test_calc.py").write_text(TESTS)
    (root / "repo" / "tests" / "test_cyclic.py").write_text(CYCLIC)
    _judge_by(root, LISTS)
    return root


MADE_BY_TYPE = '''\
"""Arithmetic."""


def _eq(self, other):
    return self.__dict__.setdefault("bound", other) == other


Total = type("Total", (), {"__init__": lambda self, value: None, "__eq__": _eq,
                          "__hash__": object.__hash__, "__float__": lambda self: 3.0})


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return {wrap}
'''
CHEATS = {
    "sticky_int": STICKY.replace("{wrap}", "Total(a - b)"),
    "sticky_plain_class_made_by_type": MADE_BY_TYPE.replace("{wrap}", "Total(a - b)"),
    "sticky_by_value_str": STICKY_BY_VALUE.replace("{wrap}", "Total(a - b)"),
    "sticky_float_with_lying_arithmetic": STICKY_BY_VALUE.replace("{wrap}", "Number(a - b)"),
}


@pytest.mark.parametrize("name", list(CHEATS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_comparison_the_candidate_decided_is_not_passed(
    task: Path, tmp_path: Path, name: str, backend: str
) -> None:
    verdict = verify_task(task, calc_patch(CHEATS[name]), tmp_path, backend, without=("tampering",))
    assert_not_passed(verdict, "failed", "made by the code under test")
    assert verdict.results[-1].name == "pytest"


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_same_class_comparing_honestly_passes(task: Path, tmp_path: Path, backend: str) -> None:
    """The control: the fix returns the same kinds of class (an int subclass, and a plain
    class, each with its own stateful but honest `__eq__`); the self-referential dict compares without a RecursionError
    (glom), and a `locals()` dict the test keeps is not emptied by the guard (dateutil)."""
    patch = calc_patch(HONEST.replace("{wrap}", "Total(a + b) if a != b else Sum(a + b)"))
    verdict = verify_task(task, patch, tmp_path, backend, without=("tampering",))
    assert verdict.status == "passed", verdict.feedback


LABELLED = '''\
"""Arithmetic, and labels that compare without case (by design)."""


class Label(str):
    def __eq__(self, other):
        return isinstance(other, str) and self.lower() == other.lower()

    def __ne__(self, other):
        return not self == other

    __hash__ = str.__hash__


def label(text: str) -> Label:
    return Label(text)


def add(a: int, b: int) -> int:
    """The sum of a and b."""
    return a - b
'''
LABEL_TESTS = """\
from calc import add, label


def test_add() -> None:
    assert add(2, 3) == 5


def test_label() -> None:
    assert label("Total") == "TOTAL"
    assert [label("a")] == ["A"]
"""


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_subclass_the_patch_left_as_it_was_keeps_its_own_comparison(
    tmp_path: Path, backend: str
) -> None:
    """Control by provenance: `Label` (a str subclass comparing without case, in the file the
    fix changes, on lines the fix does not touch) existed before the candidate: its comparisons
    are the repository's, not re-made. The same class added by the patch is the candidate's."""
    root = make_task(tmp_path / "task", calc=LABELLED, timeout_s=120)
    (root / "repo" / "tests" / "test_calc.py").write_text(LABEL_TESTS)
    _judge_by(root, 'fail_to_pass = ["tests/test_calc.py::test_add"]\n'
                    'pass_to_pass = ["tests/test_calc.py::test_label"]\n')
    fixed = LABELLED.replace("return a - b", "return a + b")
    verdict = verify_task(root, diff("calc.py", LABELLED, fixed), tmp_path / "a", backend,
                          without=("tampering",))
    assert verdict.status == "passed", verdict.feedback
    total = STICKY[STICKY.index("class Total"):STICKY.index("def add")]
    sticky = LABELLED.replace("def add(", total + "def add(").replace(
        "return a - b", "return Total(a - b)")
    verdict = verify_task(root, diff("calc.py", LABELLED, sticky), tmp_path / "b", backend,
                          without=("tampering",))
    assert_not_passed(verdict, "failed", "made by the code under test")
