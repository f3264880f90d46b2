"""Which tests call a candidate's changed functions on the unpatched code
(verifiers/coverage_probe.py), through pytest and without it, with this Python; and how a
blind run orders its regression files by it (agent/verify/regression.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ooda.agent.verify.regression import RegressionTests
from ooda.verifiers.coverage_probe import calls, changed_functions, covering, patch_lines, script

CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = ("from calc import add, sub\n\n\ndef test_add():\n    assert add(1, 1) == 0\n\n\n"
         "def test_sub():\n    assert sub(2, 1) == 1\n")
PATCH = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
         "-    return a - b\n+    return a + b\n")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(TESTS)
    (tmp_path / "tests" / "test_other.py").write_text("def test_nothing():\n    pass\n")
    return tmp_path


def test_the_changed_functions_are_read_from_the_patch_on_the_base(repo: Path) -> None:
    assert patch_lines(PATCH) == {"calc.py": [2, 2]}
    assert changed_functions(repo, patch_lines(PATCH)) == {"calc.py": [(1, 2)]}
    assert changed_functions(repo, {"calc.py": [3]}) == {}  # a blank line between functions


@pytest.mark.parametrize("without_pytest", [False, True])
def test_the_script_says_which_tests_call_the_changed_functions(
    repo: Path, tmp_path_factory: pytest.TempPathFactory, without_pytest: bool
) -> None:
    source = script(["tests/test_calc.py", "tests/test_other.py"], ["calc.py"])
    (repo / "cover.py").write_text(source)
    env = {"PATH": "/usr/bin:/bin"}
    if without_pytest:
        blocker = tmp_path_factory.mktemp("blocker")
        (blocker / "pytest.py").write_text("raise ImportError('no pytest here')\n")
        env["PYTHONPATH"] = str(blocker)
    done = subprocess.run([sys.executable, "cover.py"], cwd=repo, capture_output=True,
                          text=True, timeout=120, env=env)
    found = calls(done.stdout)
    assert found is not None, done.stdout + done.stderr
    assert found["tests/test_calc.py::test_add"] == {"calc.py": [1]}
    assert found["tests/test_calc.py::test_sub"] == {"calc.py": [5]}
    assert covering(found, changed_functions(repo, patch_lines(PATCH))) == {
        "tests/test_calc.py::test_add": True, "tests/test_calc.py::test_sub": False,
        "tests/test_other.py::test_nothing": False}
    assert calls("no result") is None


def test_files_whose_tests_call_the_change_come_first(repo: Path) -> None:
    (repo / "tests" / "test_zeta.py").write_text("import calc\n")  # named after nothing

    def run_file(path: str, timeout_s: float) -> dict[str, str]:
        return {f"{path}::test_x": "passed"}

    def cover(files: list[str], targets: list[str], timeout_s: float
              ) -> dict[str, dict[str, list[int]]]:
        assert "tests/test_zeta.py" in files and "tests/test_other.py" in files  # beside
        assert targets == ["calc.py"]
        return {"tests/test_zeta.py::test_a": {"calc.py": [1]},
                "tests/test_calc.py::test_add": {"calc.py": [5]}}

    traced = RegressionTests(repo, run_file, 60.0, max_files=1, cover=cover)
    assert traced.for_change(["calc.py"], PATCH).files == ("tests/test_zeta.py",)
    record = traced.coverage_record()
    assert record["candidates"][0]["covering"] == {"tests/test_zeta.py": 1}
    assert record["runs"][0]["tests"] == 2
    plain = RegressionTests(repo, run_file, 60.0, max_files=1)
    assert plain.for_change(["calc.py"], PATCH).files == ("tests/test_calc.py",)
