"""A blind run's regression files are bounded before they run (agent/verify/regression.py):
each file's base run gets the regression budget as its timeout, so a slow file is cut there
and left out instead of running for the tests' whole timeout."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.verify.regression import MAX_BASE_S, Regression, RegressionTests


def repo(tmp_path: Path) -> Path:
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text("from calc import add\n")
    (tmp_path / "tests" / "test_slow.py").write_text("import calc\n")
    return tmp_path


def test_a_slow_file_is_cut_at_the_budget_and_left_out(tmp_path: Path) -> None:
    asked: dict[str, float] = {}

    def run_file(path: str, timeout_s: float) -> dict[str, str]:
        asked[path] = timeout_s
        if path.endswith("test_slow.py"):
            raise TimeoutError(f"timed out after {timeout_s} s")
        return {f"{path}::test_add": "passed"}

    tests = RegressionTests(repo(tmp_path), run_file, timeout_s=1800.0)
    chosen = tests.for_change(["calc.py"])
    assert chosen.files == ("tests/test_calc.py",)
    assert set(asked.values()) == {MAX_BASE_S}  # not the tests' 1800 s
    record = tests.record()
    assert "slower than the regression tests' budget" in str(record["tests/test_slow.py"]["left_out"])


def test_tests_reaching_a_module_only_through_its_package_are_related(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for init in ("pkg/__init__.py", "pkg/sub/__init__.py"):
        (tmp_path / init).write_text("")
    (tmp_path / "pkg" / "sub" / "mod.py").write_text("def f():\n    return 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_top.py").write_text("import pkg\n")
    (tmp_path / "tests" / "test_near.py").write_text("from pkg import sub\n")
    (tmp_path / "tests" / "test_ext_sub.py").write_text("x = 1\n")
    tests = RegressionTests(tmp_path, lambda path, timeout_s: {}, timeout_s=60.0)
    # nothing names or imports pkg.sub.mod: the nearest package some test imports
    assert tests.related(["pkg/sub/mod.py"]) == ["tests/test_near.py"]
    # a package's __init__.py: the tests named after the package (with a prefix too)
    assert tests.related(["pkg/sub/__init__.py"])[0] == "tests/test_ext_sub.py"


def test_when_no_file_fits_the_tests_of_a_slow_file_that_call_the_change_run_by_id(
    tmp_path: Path,
) -> None:
    root = repo(tmp_path)
    (root / "tests" / "test_calc.py").unlink()  # only the slow file is related
    patch = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
             "-    return a - b\n+    return a + b\n")
    asked: list[tuple[str, ...]] = []

    def run_file(path: str, timeout_s: float) -> dict[str, str]:
        raise TimeoutError(f"timed out after {timeout_s} s")

    def run_ids(ids: tuple[str, ...], timeout_s: float) -> dict[str, str]:
        asked.append(ids)
        return {i: "passed" for i in ids}

    def cover(files: list[str], targets: list[str], timeout_s: float
              ) -> dict[str, dict[str, list[int]]]:
        return {"tests/test_slow.py::test_add": {"calc.py": [1]},
                "tests/test_slow.py::test_other": {}}

    tests = RegressionTests(root, run_file, 1800.0, cover=cover, run_ids=run_ids)
    chosen = tests.for_change(["calc.py"], patch)
    assert chosen == Regression(("tests/test_slow.py",), ("tests/test_slow.py::test_add",),
                                whole_files=False)
    assert tests.for_change(["calc.py"], patch) == chosen and len(asked) == 1  # run once
    assert "tests/test_slow.py (1 tests calling the change, by id)" in tests.record()
    # without a way to run ids (or without coverage) the candidate has no regression test
    assert RegressionTests(root, run_file, 1800.0, cover=cover).for_change(
        ["calc.py"], patch) == Regression((), ())
