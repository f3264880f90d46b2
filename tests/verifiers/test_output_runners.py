"""verifiers/runners/: Django's and sympy's console output read per test."""

from __future__ import annotations

from ooda.verifiers.runners import TestRequest, runner_for
from ooda.verifiers.runners.django_runner import django_labels, django_outcomes
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
