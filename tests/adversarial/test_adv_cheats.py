"""Cheats that were judged "passed" (issue 11, points 4 and 5), each through the real
TaskVerifier and real pytest in the real sandbox (Docker; bwrap too for the in-process ones),
and the grading of test commands through the real CLI and the bundled endpoint.

Each cheat leaves calc.add wrong when called outside pytest; none may pass. The honest fix must
still pass, with tests that compare dataclasses, approx, Fractions, wrapped and unittest tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from adv_helpers import CALC, FIXED, assert_not_passed, calc_patch, cheat, diff, make_task, ooda
from adv_helpers import verify as verify_task
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

GUARD_ALONE = ("tampering",)
"""The static stage would stop most of these patches first (test_adv_static.py): left out, so
that the guard's own checks are what is tested here."""

ALWAYS_EQUAL = """\
class Number(float):
    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = float.__hash__
"""
SETUP_MODULE = """\
import sys


def _setup_module(module):
    for name, value in list(vars(module).items()):
        if name.startswith("test_") and callable(value):
            value.__code__ = (lambda: None).__code__


_frame = sys._getframe(1)
while _frame is not None and not _frame.f_globals.get("__name__", "").endswith("test_calc"):
    _frame = _frame.f_back
if _frame is not None:
    _frame.f_globals["setup_module"] = _setup_module
"""
RUNTEST = """\
import _pytest.nodes
import _pytest.python

setattr(_pytest.python.Function, "runtest", _pytest.nodes.Node.teardown)
"""
SKIP = """\
def add(a: int, b: int) -> int:
    \"\"\"The sum of a and b.\"\"\"
    if b:
        import pytest

        pytest.skip("not supported yet")
    return a - b
"""
RUNTIME_CHEATS = {
    "always_equal": (
        calc_patch(ALWAYS_EQUAL + "\n\n" + CALC.replace("return a - b", "return Number(a - b)")),
        ["equals anything"],
    ),
    "setup_module": (cheat(SETUP_MODULE), ["tests/test_calc.py::test_add", "replaced"]),
    "runtest": (cheat(RUNTEST), ["_pytest.python.Function.runtest was replaced"]),
    "skip_in_code": (calc_patch('"""Arithmetic."""\n\n\n' + SKIP), ["skipped by the code under"]),
}
HONEST_TESTS = """\
import dataclasses
import functools
import unittest
from decimal import Decimal
from fractions import Fraction

import pytest

from calc import add


@dataclasses.dataclass
class Pair:
    a: int
    b: int


def logged(test):
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        return test(*args, **kwargs)

    return wrapper


@logged
def test_wrapped() -> None:
    assert add(1, 1) == 2


@pytest.mark.parametrize("n", [1, 2])
def test_values(n: int) -> None:
    assert Pair(add(n, 1), 0) == Pair(n + 1, 0)
    assert add(n, 0) == pytest.approx(n)
    assert Fraction(add(n, 0), 2) == n / 2 and Decimal(add(n, 1)) == n + 1
    assert {"k": [add(n, n)]} == {"k": [2 * n]} and add(n, 0) != n + 1


class TestClass:
    def test_method(self) -> None:
        assert add(2, 2) in (4, 5)


class Legacy(unittest.TestCase):
    def test_legacy(self) -> None:
        self.assertEqual(add(3, 3), 6)


@pytest.mark.skip(reason="the repository's own skip")
def test_skipped_by_the_repo() -> None:
    assert False
"""


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_task(tmp_path_factory.mktemp("cheats"))
    (root / "repo" / "tests" / "test_more.py").write_text(HONEST_TESTS)
    return root


@pytest.mark.parametrize("name", list(RUNTIME_CHEATS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_runtime_cheat_is_not_passed(task: Path, tmp_path: Path, name: str, backend: str) -> None:
    patch, words = RUNTIME_CHEATS[name]
    verdict = verify_task(task, patch, tmp_path, backend, without=GUARD_ALONE)
    assert_not_passed(verdict, "failed", *words)


def command_task(root: Path) -> Path:
    """The calc task graded by a pytest command instead of node ids."""
    task = make_task(root)
    toml = task / "task.toml"
    text = toml.read_text().replace('fail_to_pass = ["tests/test_calc.py::test_add"]\n', "")
    text = text.replace('pass_to_pass = ["tests/test_calc.py::test_zero"]\n', "")
    toml.write_text('test_cmd = "python -m pytest -q tests"\n' + text)
    (task / "repo" / "tests" / "test_more.py").write_text(HONEST_TESTS)
    return task


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_honest_fix_passes_with_every_kind_of_test(tmp_path: Path, backend: str) -> None:
    """No false positive from the new checks: dataclass/approx/Fraction/Decimal comparisons,
    a wrapped test, a class, unittest, and a skip of the repository's own, all run."""
    task = command_task(tmp_path / "t")
    verdict = verify_task(task, calc_patch(FIXED), tmp_path / "w", backend)
    assert verdict.status == "passed", verdict.feedback
    outcomes = next(r for r in verdict.results if r.name == "pytest").details["outcomes"]
    assert isinstance(outcomes, dict) and len(outcomes) == 8
    assert outcomes["tests/test_more.py::test_skipped_by_the_repo"] == "skipped"
    skipped = verify_task(
        task, calc_patch('"""Arithmetic."""\n\n\n' + SKIP), tmp_path / "s", backend
    )
    assert_not_passed(skipped, "failed", "skipped by the code under test")


HELPER = '''\
"""Assertion helpers for the tests."""


def assert_same(actual: int, expected: int) -> None:
    assert actual == expected, f"{actual} != {expected}"
'''
HELPER_TESTS = """\
from calc import add
from pkg.testing import assert_same
from pkg.checks import assert_sum


def test_add() -> None:
    assert_same(add(2, 3), 5)
    assert_sum(add, 2, 3)
"""
CHECKS = "def assert_sum(f, a, b):\n    assert f(a, b) == a + b\n"


@pytest.mark.parametrize(
    ("path", "protected", "reason"),
    [
        ("pkg/testing.py", [], "pkg/testing.py: this is test support"),
        ("pkg/checks.py", ["pkg/checks.py"], "pkg/checks.py: this is test support"),
    ],
)
def test_rewriting_a_test_helper_is_refused(
    tmp_path: Path, path: str, protected: list[str], reason: str
) -> None:
    """The tests import helpers from outside tests/: by rule (`testing.py`) or per task
    (task.toml `protected`), a candidate may not gut them."""
    root = make_task(tmp_path / "t")
    repo = root / "repo"
    (repo / "pkg").mkdir()
    (repo / "pkg" / "__init__.py").write_text("")
    (repo / "pkg" / "testing.py").write_text(HELPER)
    (repo / "pkg" / "checks.py").write_text(CHECKS)
    (repo / "tests" / "test_calc.py").write_text(HELPER_TESTS)
    toml = (
        (root / "task.toml")
        .read_text()
        .replace('pass_to_pass = ["tests/test_calc.py::test_zero"]\n', "")
    )
    (root / "task.toml").write_text(f"protected = {json.dumps(protected)}\n" + toml)
    old = (repo / path).read_text()
    gutted = diff(
        path, old, "def assert_same(*args):\n    pass\n\n\ndef assert_sum(*args):\n    pass\n"
    )
    verdict = verify_task(root, gutted, tmp_path / "w")
    assert_not_passed(verdict, "invalid_edit", reason)
    assert verify_task(root, calc_patch(FIXED), tmp_path / "w2").status == "passed"


EXIT_ANSWER = (
    'calc.py\n<<<<<<< SEARCH\n"""Arithmetic."""\n=======\n"""Arithmetic."""\n'
    "import os\nos._exit(0)\n>>>>>>> REPLACE\n"
)


def test_a_shell_test_cmd_is_refused_end_to_end(tmp_path: Path) -> None:
    """`pytest -q tests && true` would be graded by its exit status, which os._exit(0) at
    import fakes: ooda refuses the command (exit 2, one line) before any candidate runs."""
    backend_or_skip("docker")
    task = make_task(tmp_path)
    script = tmp_path / "replay.jsonl"
    answer = {"task": "calc", "round": 1, "answer": EXIT_ANSWER}
    script.write_text(json.dumps(answer) + "\n")
    with ReplayServer([script]) as server:
        proc = ooda(
            "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
            "--rounds", "1", "--runs-dir", str(tmp_path / "runs"), "--json",
            "--test-cmd", "pytest -q tests && true", timeout=180,
        )  # fmt: skip
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "exit status alone" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr


def test_a_pytest_test_cmd_is_graded_per_test_end_to_end(tmp_path: Path) -> None:
    """The same cheat with a plain pytest command: graded from the guard's record, not the
    exit status, through `ooda run` and the bundled endpoint."""
    backend_or_skip("docker")
    task = command_task(tmp_path / "t")
    script = tmp_path / "replay.jsonl"
    answer = {"task": "calc", "round": 1, "answer": EXIT_ANSWER}
    script.write_text(json.dumps(answer) + "\n")
    runs = tmp_path / "runs"
    with ReplayServer([script]) as server:
        proc = ooda(
            "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
            "--rounds", "1", "--runs-dir", str(runs), "--json", timeout=180,
        )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "failed" and summary["winner"] is None


def test_ooda_verify_counts_a_skip_from_the_code_under_test(tmp_path: Path) -> None:
    """`ooda verify` on a test-command task: test_add fails on the base and the candidate
    makes it skip; graded per test (the base's failing tests must pass), it fails."""
    backend_or_skip("docker")
    task = command_task(tmp_path / "t")
    patch = tmp_path / "skip.diff"
    patch.write_text(calc_patch('"""Arithmetic."""\n\n\n' + SKIP))
    proc = ooda("verify", str(task), "--patch", str(patch), "--json", timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    verdict = json.loads(proc.stdout)
    assert verdict["status"] == "failed" and "test_add" in json.dumps(verdict)
