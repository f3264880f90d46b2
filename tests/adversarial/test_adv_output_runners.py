"""Issue 33's second class: a verdict read from text the candidate's process can write. A
Django-style (`./tests/runtests.py`, unittest at verbosity 2) and a sympy-style (`bin/test` over
sympy's runner module) repository, graded per test in their environments (real TaskVerifier,
Docker and bwrap). The unfixed code prints the lines the old parsers looked for (finishing
unittest's half-printed `test_x (...) ... ` line with `ok`, a `test_x ok` line) and, in a second
variant, ends the process with status 0 once they are printed: the recording harness grades from
the runner's own calls (verifiers/runners/harness.py), so neither passes. Control: the fix
passes, even when it prints the same lines.
"""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path

import pytest
from adv_helpers import assert_not_passed
from adv_helpers import verify as verify_task

BUGGY = "def double(x):\n    return x + x + 1\n"
FIXED = "def double(x):\n    return x + x\n"
RUNTESTS = '''\
import argparse, os, sys, unittest
parser = argparse.ArgumentParser()
parser.add_argument("labels", nargs="*")
parser.add_argument("--verbosity", type=int, default=1)
parser.add_argument("--parallel", default="1")
args = parser.parse_args()
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [here, os.path.dirname(here)]
suite = unittest.defaultTestLoader.loadTestsFromNames(args.labels)
result = unittest.TextTestRunner(verbosity=args.verbosity).run(suite)
sys.exit(not result.wasSuccessful())
'''
DJANGO_TESTS = '''\
import unittest

from calc import double


class CalcTests(unittest.TestCase):
    def test_double(self):
        self.assertEqual(double(2), 4)

    def test_zero(self):
        self.assertEqual(double(0), 0)
'''
BIN_TEST = '''\
import os, sys
sys.path.insert(0, os.getcwd())
from sympy.testing.runtests import run
sys.exit(0 if run([a for a in sys.argv[1:] if a.endswith(".py")]) else 1)
'''
RUNTESTS_MODULE = '''\
class PyTestReporter:
    def entering_test(self, f):
        print(f.__name__, end=" ", flush=True)

    def test_pass(self, char="ok"):
        print(char)

    def test_fail(self, exc_info):
        print("F")

    def test_exception(self, exc_info):
        print("E")


def run(files):
    reporter, ok = PyTestReporter(), True
    for path in files:
        gl = {"__file__": path}  # as sympy's SymPyTests.test_file loads a test file
        with open(path) as handle:
            source = handle.read()
        code = compile(source, path, "exec", flags=0, dont_inherit=True)
        exec(code, gl)
        for name in [n for n in gl if n.startswith("test_")]:
            reporter.entering_test(gl[name])
            try:
                gl[name]()
                reporter.test_pass()
            except AssertionError as exc:
                reporter.test_fail(exc); ok = False
            except Exception as exc:
                reporter.test_exception(exc); ok = False
    return ok
'''
SYMPY_TESTS = '''\
from calc import double


def test_double():
    assert double(2) == 4


def test_zero():
    assert double(0) == 0
'''
KINDS = {
    "django": ("tests/calc_tests/tests.py", DJANGO_TESTS,
               "test_double (calc_tests.tests.CalcTests)", "test_zero (calc_tests.tests.CalcTests)",
               {"tests/runtests.py": RUNTESTS, "tests/calc_tests/__init__.py": ""}),
    "sympy": ("sympy_like/tests/test_calc.py", SYMPY_TESTS, "test_double", "test_zero",
              {"bin/test": BIN_TEST, "sympy/__init__.py": "", "sympy/testing/__init__.py": "",
               "sympy/testing/runtests.py": RUNTESTS_MODULE}),
}
PRINTS_OK = '''\
import sys


def double(x):
    # the old parsers read `test_x (...) ... ok` (unittest, on stderr) and `test_x ok` lines
    sys.stderr.write("ok\\ntest_double (calc_tests.tests.CalcTests) ... ok\\n")
    sys.stdout.write("ok\\ntest_double ok\\n")
    return x + x + 1
'''
PRINTS_OK_AND_EXITS = '''\
import os, sys


def double(x):
    sys.stderr.write("ok\\ntest_double (calc_tests.tests.CalcTests) ... ok\\n")
    sys.stderr.write("test_zero (calc_tests.tests.CalcTests) ... ok\\n")
    sys.stdout.write("ok\\ntest_double ok\\ntest_zero ok\\n")
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(0)
'''
HONEST_PRINTS = PRINTS_OK.replace("x + x + 1", "x + x")


def _patch(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"a/{path}", f"b/{path}"))
    mode = "" if old else "new file mode 100644\n"
    return f"diff --git a/{path} b/{path}\n{mode}{body}"


def _task(root: Path, kind: str) -> Path:
    test_path, tests, f2p, p2p, files = KINDS[kind]
    repo = root / "repo"
    for name, text in {"calc.py": BUGGY, **files}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (root / "tests.diff").write_text(_patch(test_path, "", tests).replace(
        f"--- a/{test_path}", "--- /dev/null"))
    (root / "task.toml").write_text(
        f'statement = "double() adds one"\nfail_to_pass = ["{f2p}"]\npass_to_pass = ["{p2p}"]\n'
        'test_patch = "tests.diff"\nrun_test_files = true\n\n'
        f'[environment]\npython = "3.11"\ninstall = ""\n\n[environment.runner]\nkind = "{kind}"\n')
    return root


@pytest.fixture(scope="module", params=sorted(KINDS))
def task(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _task(tmp_path_factory.mktemp(request.param), request.param)


SHOULD_STOP = "import unittest.case\n\n\ndef double(x):\n    raise unittest.case._ShouldStop()\n"
SERIALISER_LIES = '''\
import json, sys

_iterencode, _dumps, _exit = json.JSONEncoder.iterencode, json.dumps, sys.exit


def _passed(value):
    # the record as it is serialised: every failure a pass, no failure counted, status 0
    if isinstance(value, dict):
        return {k: 0 if k in ("exit_code", "failures") else _passed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_passed(v) for v in value]
    return "passed" if value in ("failed", "error") else value


json.JSONEncoder.iterencode = lambda self, o, _one_shot=False: _iterencode(self, _passed(o), _one_shot)
json.dumps = lambda o, *args, **kwargs: _dumps(_passed(o), *args, **kwargs)
sys.exit = lambda code=0: _exit(0)
''' + BUGGY
FLIPS_THE_RECORD = '''\
import sys
import unittest


def _flip(everything):
    # the harness's own record, reached through a function it installed (`__globals__`)
    names = getattr(unittest.TestResult.addFailure, "__globals__", {})
    if isinstance(names.get("tests"), dict):
        for key in list(names["tests"]):
            names["tests"][key] = "passed"
        if everything and isinstance(names.get("failures"), list):
            names["failures"][0] = 0


class _Stream:  # each line the runner prints at its end flips the record again
    def __init__(self, inner):
        self.inner = inner

    def write(self, text):
        _flip(False)
        return self.inner.write(text)

    def __getattr__(self, name):
        return getattr(self.inner, name)


_exit = sys.exit


def _exit_0(code=0):
    _flip(True)
    _exit(0)


sys.stdout, sys.stderr = _Stream(sys.stdout), _Stream(sys.stderr)
'''
FLIPS_THEN_EXITS_0 = FLIPS_THE_RECORD + "sys.exit = _exit_0\n" + BUGGY
FLIPS_THE_RECORD += BUGGY
CHEATS = {"prints_ok": PRINTS_OK, "prints_ok_and_exits_0": PRINTS_OK_AND_EXITS,
          "raises_unittests_internal_stop": SHOULD_STOP,  # (swallowed by unittest as a success)
          "rewrites_the_record_as_it_is_serialised": SERIALISER_LIES,  # held-out batch 5
          "flips_the_record_in_memory": FLIPS_THE_RECORD,  # (after batch 5: U3)
          "flips_the_record_in_memory_then_exits_0": FLIPS_THEN_EXITS_0}


@pytest.mark.parametrize("name", list(CHEATS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_printed_ok_lines_pass_nothing(task: Path, tmp_path: Path, name: str, backend: str) -> None:
    verdict = verify_task(task, _patch("calc.py", BUGGY, CHEATS[name]), tmp_path, backend)
    assert_not_passed(verdict, "failed")
    if name == "prints_ok_and_exits_0":
        assert "record of the run is missing" in verdict.feedback, verdict.feedback


STICKY_CLASS = '''\
class Doubled:
    """Binds to the first value it is compared with, then compares honestly with it."""

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return self.__dict__.setdefault("bound", other) == other

    def __hash__(self):
        return 0


def double(x):
    return Doubled(x + x + 1)
'''
HONEST_CLASS = STICKY_CLASS.replace(
    '        return self.__dict__.setdefault("bound", other) == other\n',
    '        self.__dict__["compared"] = self.__dict__.get("compared", 0) + 1\n'
    '        return self.value == getattr(other, "value", other)\n',
).replace("x + x + 1", "x + x").replace("Binds to the first value", "Counts the values")


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_remembering_comparison_passes_nothing(task: Path, tmp_path: Path, backend: str) -> None:
    """Issue 33's first class under the output-graded runners: a value whose class compares by
    the code under test is asked about values it was never given before `assertEqual` (Django's
    unittest runner) or a comparison of a test file sympy's runner compiles (the harness's
    `before`); control: HONEST_CLASS in test_the_fix_passes_even_when_it_prints."""
    verdict = verify_task(task, _patch("calc.py", BUGGY, STICKY_CLASS), tmp_path, backend)
    assert_not_passed(verdict, "failed", "whose comparison was made by the code under test")


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_fix_passes_even_when_it_prints(task: Path, tmp_path: Path, backend: str) -> None:
    for index, source in enumerate((HONEST_CLASS, HONEST_PRINTS)):
        verdict = verify_task(task, _patch("calc.py", BUGGY, source), tmp_path / str(index),
                              backend)
        assert verdict.status == "passed", verdict.feedback


# written after the harness: the runner's own result objects turned against it
RESULT_CLASS_LIES = '''\
import unittest


def _success(self, test, err):
    unittest.TestResult.addSuccess(self, test)


unittest.TextTestResult.addFailure = _success
unittest.TextTestResult.addError = _success


def double(x):
    return x + x + 1
'''
REPORTER_LIES = '''\
import sys


def double(x):
    runtests = sys.modules.get("sympy.testing.runtests")
    if runtests is not None:
        runtests.PyTestReporter.test_fail = runtests.PyTestReporter.test_pass
    return x + x + 1
'''


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_result_class_turned_into_a_liar_passes_nothing(
    task: Path, tmp_path: Path, backend: str
) -> None:
    source = RESULT_CLASS_LIES if "calc_tests" in (task / "tests.diff").read_text() else REPORTER_LIES
    verdict = verify_task(task, _patch("calc.py", BUGGY, source), tmp_path, backend)
    assert_not_passed(verdict, "failed")
