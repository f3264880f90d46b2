"""Which files a repository's pytest collects as tests (agent/support/collected.py): read from
its own configuration, wherever pytest reads it, plus the required ids' files; doctest examples
compared by content."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.support.collected import changed_examples, collected, doctest_changes

CONFIGS = {
    "pytest.ini": "[pytest]\npython_files = tests.py *_tests.py\naddopts = --doctest-modules\n",
    "pyproject.toml": '[tool.pytest.ini_options]\npython_files = ["tests.py", "*_tests.py"]\n'
                      'addopts = "--doctest-modules"\n',
    "tox.ini": "[tox]\nenvlist = py3\n\n[pytest]\npython_files = tests.py *_tests.py\n"
               "addopts = --doctest-modules\n",
    "setup.cfg": "[tool:pytest]\npython_files = tests.py *_tests.py\naddopts = --doctest-modules\n",
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_python_files_and_doctest_options_are_read_where_pytest_reads_them(
    tmp_path: Path, name: str
) -> None:
    (tmp_path / name).write_text(CONFIGS[name])
    (tmp_path / "pkg").mkdir()
    for module in ("checks.py", "mod.py"):
        (tmp_path / "pkg" / module).write_text("")
    ids = ["pkg/checks.py::test_x", "pkg/mod.py::pkg.mod.f", "pkg/hidden_only.py::test_y"]
    found = collected(tmp_path, ids, ["t/x.py"])
    assert {"tests.py", "*_tests.py", "/pkg/checks.py", "/t/x.py"} <= set(found.patterns)
    assert "/pkg/hidden_only.py" not in found.patterns  # only the hidden tests add it
    assert found.doctest_modules
    assert found.doctest_files == ("pkg/mod.py",)  # a required doctest of a code module


def test_without_configuration_pytest_s_defaults_hold(tmp_path: Path) -> None:
    found = collected(tmp_path, [], [], "python -m pytest --doctest-glob='*.rst'")
    assert found.patterns == ("test_*.py", "*_test.py")
    assert found.doctest_globs == ("*.rst",) and not found.doctest_modules


MODULE = '''"""Tools.

>>> double(2)
4
"""


def double(x):
    """Twice x.

    >>> double(3)
    6
    """
    return x * 2
'''


def test_changed_or_removed_examples_are_found_and_new_code_is_not() -> None:
    assert changed_examples(MODULE, MODULE.replace("x * 2", "x + x"), True) == []
    assert changed_examples(MODULE, MODULE.replace("    6\n", "    7\n"), True) == ["double"]
    assert changed_examples(MODULE, MODULE.replace(">>> double(2)\n4\n", ""), True) == ["<module>"]
    added = MODULE.replace("    6\n", "    6\n    >>> double(0)\n    0\n")
    assert changed_examples(MODULE, added, True) == ["double"]  # the docstring's list changed
    text = "Guide\n\n>>> 1 + 1\n2\n"
    assert changed_examples(text, text.replace("Guide", "The guide"), False) == []
    assert changed_examples(text, text.replace("\n2\n", "\n3\n"), False) == [""]


def test_doctest_changes_look_only_at_files_the_run_collects_as_doctests(tmp_path: Path) -> None:
    base, work = tmp_path / "base", tmp_path / "work"
    for root in (base, work):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "mod.py").write_text(MODULE)
    (work / "pkg" / "mod.py").write_text(MODULE.replace("    6\n", "    7\n"))
    (base / "pytest.ini").write_text("[pytest]\naddopts = --doctest-modules\n")
    tests = collected(base)
    assert doctest_changes(base, work, ["pkg/mod.py"], tests, every_module=True) == [
        "pkg/mod.py (double)"
    ]
    assert doctest_changes(base, work, ["pkg/mod.py"], tests, every_module=False) == []
    required = collected(base, ["pkg/mod.py::pkg.mod.double"])
    assert doctest_changes(base, work, ["pkg/mod.py"], required, every_module=False) != []
