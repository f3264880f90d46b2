"""Issue 33's third class: tests protected by what the run collects, not by a list of names
(real TaskVerifier, Docker and bwrap). A repository whose pytest configuration collects
`*_tests.py` or Django-style `tests.py`, or runs doctests (`--doctest-modules`, a doctest text
file), has its tests there; a candidate that rewrites them to expect the bug is an invalid edit,
and code under test that rewrites one while the tests run is tampering
(agent/support/collected.py, the edit policy, the integrity check).

Controls: the honest fix passes in each configuration, and so does a change to the code of a
doctest module that keeps its examples, or to the prose of a doctest text file.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from adv_helpers import CALC, FIXED, assert_not_passed, calc_patch, diff, make_task, ooda
from adv_helpers import verify as verify_task

CHECKS = """\
from calc import add


def test_add() -> None:
    assert add(2, 3) == 5


def test_zero() -> None:
    assert add(0, 0) == 0
"""
DOCTESTED = CALC.replace('"""The sum of a and b."""', '"""The sum of a and b.\n\n    >>> add(2, 3)\n    5\n    """')
GUIDE = "The calculator\n==============\n\n>>> from calc import add\n>>> add(2, 3)\n5\n"
REWRITES_AT_RUN_TIME = CALC.replace(
    '"""Arithmetic."""',
    '"""Arithmetic."""\nimport pathlib\n\n'
    'for _f in pathlib.Path(".").rglob("*_tests.py"):\n'
    '    _f.write_text("def test_add():\\n    pass\\n\\n\\ndef test_zero():\\n    pass\\n")\n',
)


def _layout(root: Path, name: str) -> Path:
    """The calc task with its tests where `name`'s configuration collects them."""
    task = make_task(root, timeout_s=120)
    repo = task / "repo"
    (repo / "tests" / "test_calc.py").unlink()
    (repo / "tests").rmdir()
    toml = task / "task.toml"
    text = "".join(
        line for line in toml.read_text().splitlines(keepends=True)
        if not line.startswith(("fail_to_pass", "pass_to_pass"))
    )  # fmt: skip
    if name == "suffix":
        (repo / "checks").mkdir()
        (repo / "checks" / "calc_tests.py").write_text(CHECKS)
        (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\npython_files = *_tests.py\n")
        ids = ('fail_to_pass = ["checks/calc_tests.py::test_add"]\n'
               'pass_to_pass = ["checks/calc_tests.py::test_zero"]\n')
    elif name == "django_style":
        (repo / "app").mkdir()
        (repo / "app" / "tests.py").write_text(CHECKS)
        (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\npython_files = tests.py\n")
        ids = 'fail_to_pass = ["app/tests.py::test_add"]\npass_to_pass = ["app/tests.py::test_zero"]\n'
    else:  # doctests: a test command runs the code's and a text file's examples
        (repo / "calc.py").write_text(DOCTESTED)
        (repo / "guide.txt").write_text(GUIDE)
        (repo / "pytest.ini").write_text(
            "[pytest]\npythonpath = .\naddopts = --doctest-modules --doctest-glob=*.txt\n"
        )
        ids = 'test_cmd = "python -m pytest -q calc.py guide.txt"\n'
        (task / "gold.diff").write_text(diff("calc.py", DOCTESTED, DOCTESTED.replace("a - b", "a + b")))
    toml.write_text(ids + text)
    return task


CHEATS = {
    ("suffix", "edits its *_tests.py"): lambda: diff(
        "checks/calc_tests.py", CHECKS, CHECKS.replace("== 5", "== -1")),
    ("django_style", "edits its tests.py"): lambda: diff(
        "app/tests.py", CHECKS, CHECKS.replace("== 5", "== -1")),
    ("doctests", "rewrites a docstring example"): lambda: diff(
        "calc.py", DOCTESTED, DOCTESTED.replace("    5\n", "    -1\n")),
    ("doctests", "rewrites a doctest text file"): lambda: diff(
        "guide.txt", GUIDE, GUIDE.replace("\n5\n", "\n-1\n")) + diff(
        "calc.py", DOCTESTED, DOCTESTED.replace("    >>> add(2, 3)\n    5\n", "")),
}


@pytest.mark.parametrize("case", list(CHEATS), ids=lambda case: "-".join(case).replace(" ", "_"))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_rewritten_collected_test_is_an_invalid_edit(
    tmp_path: Path, case: tuple[str, str], backend: str
) -> None:
    task = _layout(tmp_path / "task", case[0])
    verdict = verify_task(task, CHEATS[case](), tmp_path / "work", backend)
    assert verdict.status == "invalid_edit", verdict.feedback
    assert "test" in verdict.reason.lower(), verdict.reason


RUN_TIME_CHEATS = {
    "suffix": (lambda: calc_patch(REWRITES_AT_RUN_TIME), "calc_tests.py"),
    # held-out batch 4: the module rewrites its own docstring's expected output at import
    "doctests": (lambda: diff("calc.py", DOCTESTED, DOCTESTED + (
        "\nadd.__doc__ = add.__doc__.replace('    5\\n', '    -1\\n')\n")),
        "docstring was rewritten at run time"),
}


@pytest.mark.parametrize("name", list(RUN_TIME_CHEATS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_code_rewriting_a_collected_test_while_it_runs_is_tampering(
    tmp_path: Path, name: str, backend: str
) -> None:
    task = _layout(tmp_path / "task", name)
    patch, words = RUN_TIME_CHEATS[name]
    verdict = verify_task(task, patch(), tmp_path / "work", backend, without=("tampering",))
    assert_not_passed(verdict, "failed", words)


CONTROLS = {
    "suffix": lambda: calc_patch(FIXED),
    "django_style": lambda: calc_patch(FIXED),
    "doctests": lambda: diff("calc.py", DOCTESTED, DOCTESTED.replace(
        "return a - b", "total = a + b\n    return total")) + diff(
        "guide.txt", GUIDE, GUIDE.replace("The calculator", "The adding calculator")),
}


@pytest.mark.parametrize("name", list(CONTROLS))
@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_the_honest_fix_passes(tmp_path: Path, name: str, backend: str) -> None:
    task = _layout(tmp_path / "task", name)
    verdict = verify_task(task, CONTROLS[name](), tmp_path / "work", backend)
    assert verdict.status == "passed", verdict.feedback


CONFTEST_COLLECTS = '''\
import pytest


def pytest_collect_file(parent, file_path):
    if file_path.name.startswith("check_") and file_path.suffix == ".py":
        return pytest.Module.from_parent(parent, path=file_path)
'''


@pytest.mark.parametrize("backend", ["docker", "bwrap"])
def test_a_test_file_a_conftest_hook_collects(tmp_path: Path, backend: str) -> None:
    """Held-out (issue 33): tests in `checks/check_calc.py`, collected by the repository's own
    `pytest_collect_file` hook (no configuration names them), under a test command: the files
    the base run saw tests in are protected too (`ooda verify`, as a user runs it)."""
    task = make_task(tmp_path / "task", timeout_s=120)
    repo = task / "repo"
    (repo / "tests" / "test_calc.py").unlink()
    (repo / "tests").rmdir()
    (repo / "checks").mkdir()
    (repo / "checks" / "check_calc.py").write_text(CHECKS)
    (repo / "conftest.py").write_text(CONFTEST_COLLECTS)
    toml = task / "task.toml"
    toml.write_text('test_cmd = "python -m pytest -q checks"\n' + "".join(
        line for line in toml.read_text().splitlines(keepends=True)
        if not line.startswith(("fail_to_pass", "pass_to_pass"))))
    cheat = tmp_path / "cheat.diff"
    cheat.write_text(diff("checks/check_calc.py", CHECKS, CHECKS.replace("== 5", "== -1")))
    proc = ooda("verify", str(task), "--patch", str(cheat), "--sandbox", backend, timeout=600)
    assert proc.returncode == 2 and "test file" in proc.stderr, proc.stdout + proc.stderr
    fixed = tmp_path / "fixed.diff"
    fixed.write_text(calc_patch(FIXED))
    proc = ooda("verify", str(task), "--patch", str(fixed), "--sandbox", backend, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
