"""verifiers/runners/: Django's and sympy's console output read per test; the recording
harness's comparison probe."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ooda.verifiers.runners import TestRequest, runner_for
from ooda.verifiers.runners.django_runner import django_labels, django_outcomes
from ooda.verifiers.runners.output import harness_source
from ooda.verifiers.runners.sympy_runner import RUNNER as SYMPY_RUNNER
from ooda.verifiers.runners.sympy_runner import sympy_outcomes

DJANGO = """\
Testing against Django installed in '/testbed/django'
test_add (admin_views.tests.AdminViewTests) ... ok
test_delete (admin_views.tests.AdminViewTests)
Deleting an object works. ... FAIL
test_edit (admin_views.tests.AdminViewTests.test_edit) ... ERROR
test_skip (admin_views.tests.AdminViewTests) ... skipped 'no db'
test_xf (admin_views.tests.AdminViewTests) ... expected failure
"""
SYMPY = """\
============================= test process starts ==============================
sympy/core/tests/test_basic.py[4]
test_structure ok
test_equality F
test_broken E
test_later f

________________________________ xpassed tests _________________________________
"""


def test_django_verbosity_2_lines_are_graded_per_test() -> None:
    assert django_outcomes(DJANGO) == {
        "test_add (admin_views.tests.AdminViewTests)": "passed",
        "test_delete (admin_views.tests.AdminViewTests)": "failed",
        "test_edit (admin_views.tests.AdminViewTests)": "error",
        "test_skip (admin_views.tests.AdminViewTests)": "skipped",
        "test_xf (admin_views.tests.AdminViewTests)": "xfailed",
    }


def test_sympy_verbose_lines_are_graded_per_test() -> None:
    assert sympy_outcomes(SYMPY) == {"test_structure": "passed", "test_equality": "failed",
                                     "test_broken": "error", "test_later": "xfailed"}


def test_labels_and_commands() -> None:
    ids = ["test_add (admin_views.tests.AdminViewTests)", "test_b (forms.tests.T)"]
    assert django_labels(ids, [], False) == ["admin_views.tests", "forms.tests"]
    assert django_labels(ids, ["tests/admin_views/tests.py", "docs/x.txt"], True) == [
        "admin_views.tests"]
    assert runner_for("sympy") is SYMPY_RUNNER
    argv, env = SYMPY_RUNNER.command(TestRequest(
        ids=("test_x",), runner_cmd="PYTHONWARNINGS='ignore::UserWarning' bin/test -C --verbose",
        test_files=("sympy/core/tests/test_basic.py",), whole_files=True))
    assert argv == ["python3", "bin/test", "-C", "--verbose", "sympy/core/tests/test_basic.py"]
    assert env == {"PYTHONWARNINGS": "ignore::UserWarning"}


def test_the_harness_asks_a_value_whose_class_compares_by_the_patch_first(tmp_path: Path) -> None:
    """harness.before (issue 33's first class under the output-graded runners): a remembering
    `__eq__` on lines the patch wrote, and an always-equal C callable set as `__eq__` (no code:
    the harness has no provenance to clear it), say they equal a value they were never given;
    an honest class on the same lines, and builtins' own slots, do not."""
    import functools
    import importlib.util
    import operator
    import random

    path = tmp_path / "harness.py"
    path.write_text(harness_source())
    spec = importlib.util.spec_from_file_location("harness_under_test", path)
    assert spec is not None and spec.loader is not None
    harness: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(harness)
    harness._random = random.Random(33)
    source = tmp_path / "calc.py"
    source.write_text(
        "class Sticky:\n"
        "    def __eq__(self, other):\n"
        "        return self.__dict__.setdefault('bound', other) == other\n"
        "    __hash__ = object.__hash__\n"
        "class Honest:\n"
        "    def __init__(self, value):\n"
        "        self.value = value\n"
        "    def __eq__(self, other):\n"
        "        return self.value == getattr(other, 'value', other)\n"
        "    __hash__ = object.__hash__\n"
        "class Always(int):\n"
        "    pass\n"
        "Always.__eq__ = functools.partial(operator.is_not, None)\n"
        "class Six:\n"
        "    def __eq__(self, other):\n"
        "        return other == 6\n"
        "    __hash__ = object.__hash__\n"
    )
    names: dict[str, Any] = {"functools": functools, "operator": operator, "__name__": "calc"}
    exec(compile(source.read_text(), str(source), "exec"), names)  # noqa: S102
    harness.written[os.path.realpath(source)] = [(1, 17)]
    for _ in range(50):  # (`assert S(6) != 5`: its number unseen, no probe near it)
        harness.before(names["Six"](), 5)
    harness.before(names["Honest"](4), 4)
    harness.before([names["Honest"](4), 3], [4, 3])
    harness.before(5, [5])  # scalars only: nothing to ask
    assert harness.decided == []
    harness.before(names["Sticky"](), 4)
    harness.before([names["Always"](9)], [4])
    assert harness.decided == ["calc.Sticky", "calc.Always"]
