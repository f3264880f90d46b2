"""Django-style (`./tests/runtests.py`) and sympy-style (`bin/test`) test suites in their own
environments, real Docker: small local repositories whose runners print in those formats (no
real django or sympy, but sympy's runner module where sympy has it), graded per test from the
recording harness's record (verifiers/runners/harness.py), base and patched."""

from __future__ import annotations

import difflib
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ooda.tasks.loader import load_task

BUGGY = "def double(x):\n    return x + x + 1\n"
FIXED = "def double(x):\n    return x + x\n"
RUNTESTS = '''\
#!/usr/bin/env python3
"""Like Django's runtests.py: unittest at verbosity 2 over the labels given."""
import argparse, os, sys, unittest
parser = argparse.ArgumentParser()
parser.add_argument("labels", nargs="*")
parser.add_argument("--verbosity", type=int, default=1)
parser.add_argument("--parallel", default="1")
parser.add_argument("--settings")
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

    def test_type(self):
        """Documented: the docstring line comes before the outcome."""
        self.assertIsInstance(double(2), int)
'''
BIN_TEST = '''\
#!/usr/bin/env python3
"""Like sympy's bin/test --verbose: its runner (sympy_like's runtests) over the files given."""
import os, sys
sys.path.insert(0, os.getcwd())
from sympy.testing.runtests import run
sys.exit(0 if run([a for a in sys.argv[1:] if a.endswith(".py")]) else 1)
'''
RUNTESTS_MODULE = '''\
"""Like sympy.testing.runtests: a reporter told each test's outcome; `test_name ok|F|E`."""
import importlib.util


class PyTestReporter:
    def entering_test(self, f):
        print(f.__name__, end=" ")

    def test_pass(self, char="ok"):
        print(char)

    def test_fail(self, exc_info):
        print("F")

    def test_exception(self, exc_info):
        print("E")


def run(files):
    reporter, ok = PyTestReporter(), True
    print("============================= test process starts ==============================")
    for path in files:
        spec = importlib.util.spec_from_file_location("t", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name in [n for n in vars(module) if n.startswith("test_")]:
            reporter.entering_test(getattr(module, name))
            try:
                getattr(module, name)()
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


def test_type():
    assert isinstance(double(2), int)
'''


def _repo(root: Path, files: dict[str, str]) -> Path:
    repo = root / "repo"
    for name, text in {"calc.py": BUGGY, **files}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _patch(path: str, old: str, new: str) -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"a/{path}", f"b/{path}"))
    mode = "" if old else "new file mode 100644\n"
    return f"diff --git a/{path} b/{path}\n{mode}{body}"


def _task(root: Path, kind: str, test_path: str, tests: str, f2p: list[str], p2p: list[str],
          files: dict[str, str]) -> Path:
    _repo(root, files)
    (root / "tests.diff").write_text(_patch(test_path, "", tests).replace(
        f"--- a/{test_path}", "--- /dev/null"))
    (root / "task.toml").write_text(
        f'statement = "double() adds one"\nfail_to_pass = {f2p!r}\npass_to_pass = {p2p!r}\n'
        'test_patch = "tests.diff"\nrun_test_files = true\n\n'
        f'[environment]\npython = "3.11"\ninstall = ""\n\n[environment.runner]\nkind = "{kind}"\n'
        .replace("'", '"'))
    return root


CASES = {
    "django": ("tests/calc_tests/tests.py", DJANGO_TESTS,
               ["test_double (calc_tests.tests.CalcTests)"],
               ["test_type (calc_tests.tests.CalcTests)"],
               {"tests/runtests.py": RUNTESTS, "tests/calc_tests/__init__.py": ""}),
    "sympy": ("sympy_like/tests/test_calc.py", SYMPY_TESTS, ["test_double"], ["test_type"],
              {"bin/test": BIN_TEST, "sympy/__init__.py": "", "sympy/testing/__init__.py": "",
               "sympy/testing/runtests.py": RUNTESTS_MODULE}),
}


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_output_graded_runner_in_its_environment(docker: Any, tmp_path: Path,
                                                    kind: str) -> None:
    from ooda.agent.verify.prepare import make_plan
    from ooda.agent.verify.verifier import TaskVerifier

    test_path, tests, f2p, p2p, files = CASES[kind]
    task = load_task(_task(tmp_path / "task", kind, test_path, tests, f2p, p2p, files))
    # the plan, as every command makes it: its base run measures what passed before
    _, verifier = make_plan(task, lambda plan: TaskVerifier(plan, docker, tmp_path / "work",
                                                            concurrency=1))
    try:
        assert verifier.run_base_tests() == {f2p[0]: "failed", p2p[0]: "passed"}
        good = verifier.verify(_patch("calc.py", BUGGY, FIXED))
        assert good.status == "passed", good.feedback
        bad = verifier.verify(_patch("calc.py", BUGGY, "def double(x):\n    return str(x)\n"))
        assert bad.status == "failed"
        assert f2p[0] in bad.feedback and p2p[0] in bad.feedback
        assert "(passed before the change)" in bad.feedback  # measured by the plan's base run
    finally:
        verifier.close()
