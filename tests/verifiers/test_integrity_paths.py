"""Which workspace files decide how tests run (verifiers/pytest_check/integrity.py): bytecode
counts as its source does."""

from __future__ import annotations

from ooda.verifiers.pytest_check.integrity import run_relevant


def test_bytecode_of_a_library_module_is_the_candidates_as_the_module_is() -> None:
    # pytest-dev/pytest's own tests import src/_pytest in a subprocess that writes bytecode
    assert not run_relevant("src/_pytest/__pycache__/main.cpython-39.pyc")
    assert not run_relevant("src/__pycache__/pytest.cpython-39.opt-2.pyc")
    assert not run_relevant("src/_pytest/main.py")


def test_bytecode_of_tests_conftest_and_shadowing_modules_decides_how_tests_run() -> None:
    assert run_relevant("tests/__pycache__/test_a.cpython-39-pytest-8.3.2.pyc")
    assert run_relevant("__pycache__/conftest.cpython-311.pyc")
    assert run_relevant("__pycache__/os.cpython-311.pyc")
    assert run_relevant("pkg/__pycache__/testing.cpython-311.pyc")
    assert run_relevant("evil.pth") and run_relevant("pkg/__pycache__/notes.txt")
