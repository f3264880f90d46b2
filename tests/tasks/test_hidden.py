"""What of a task is hidden (tasks/hidden.py): read from its test patch and base files."""

from __future__ import annotations

from pathlib import Path

from ooda.tasks.hidden import has_hidden_tests, hidden_tests, visible_task
from ooda.tasks.loader import Task

BASE_TESTS = "from calc import add\n\n\ndef test_add_small_numbers():\n    assert add(1, 2) == 3\n"
TEST_PATCH = "".join(line + "\n" for line in [
    "diff --git a/tests/test_calc.py b/tests/test_calc.py",
    "--- a/tests/test_calc.py",
    "+++ b/tests/test_calc.py",
    "@@ -3,3 +3,7 @@",
    " ",
    " def test_add_small_numbers():",
    "     assert add(1, 2) == 3",
    "+",
    "+",
    "+def test_add_negative_numbers():",
    '+    assert add(-2, -3) == -5, "negatives are summed"',
])

def make_task(tmp_path: Path, **fields: object) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_calc.py").write_text(BASE_TESTS)
    base: dict[str, object] = {
        "id": "calc", "statement": "add() is wrong for negative numbers", "repo": repo,
        "fail_to_pass": ["tests/test_calc.py::test_add_negative_numbers"],
        "pass_to_pass": ["tests/test_calc.py::test_add_small_numbers"],
        "test_patch": TEST_PATCH, "gold_patch": "diff", "test_cmd": None,
    }
    base.update(fields)
    return Task(**base)  # type: ignore[arg-type]


def test_the_hidden_part_is_what_the_test_patch_adds(tmp_path: Path) -> None:
    hidden = hidden_tests(make_task(tmp_path))
    assert hidden.any and hidden.files == ("tests/test_calc.py",)
    assert hidden.ids == ("tests/test_calc.py::test_add_negative_numbers",
                          "tests/test_calc.py::test_add_small_numbers")
    assert hidden.names == ("test_add_negative_numbers",)  # the base defines the other one
    assert hidden.lines == ("def test_add_negative_numbers():",
                            'assert add(-2, -3) == -5, "negatives are summed"')
    prompt = "Fix add(). See test_add_small_numbers in tests/test_calc.py."
    assert hidden.leaks(prompt) == []
    assert hidden.leaks("the test test_add_negative_numbers fails") == ["test_add_negative_numbers"]
    assert hidden.leaks('  assert add(-2, -3) == -5, "negatives are summed"\n') == [
        'assert add(-2, -3) == -5, "negatives are summed"']


def test_what_the_statement_already_says_is_not_hidden(tmp_path: Path) -> None:
    task = make_task(tmp_path, statement="test_add_negative_numbers fails: add(-2, -3) != -5")
    assert hidden_tests(task).names == ()


def test_a_dunder_method_of_a_test_class_is_not_a_hidden_name(tmp_path: Path) -> None:
    patch = TEST_PATCH.replace("+3,7", "+3,11") + "".join(line + "\n" for line in [
        "+",
        "+class TestAddWithState:",
        "+    def __init__(self) -> None:",
        "+        self.total = 0",
    ])
    hidden = hidden_tests(make_task(tmp_path, test_patch=patch))
    assert "TestAddWithState" in hidden.names and "__init__" not in hidden.names
    assert hidden.leaks("calc/__init__.py\nclass Calc:\n    def __init__(self):") == []


def test_a_task_without_a_test_patch_hides_nothing(tmp_path: Path) -> None:
    task = make_task(tmp_path, test_patch=None)
    assert not has_hidden_tests(task) and not hidden_tests(task).any
    assert hidden_tests(task).leaks("test_add_negative_numbers") == []


def test_the_visible_task_keeps_the_issue_and_drops_the_judging_material(tmp_path: Path) -> None:
    task = make_task(tmp_path)
    seen = visible_task(task)
    assert (seen.statement, seen.repo, seen.id) == (task.statement, task.repo, task.id)
    assert (seen.fail_to_pass, seen.pass_to_pass, seen.test_patch, seen.gold_patch) == (
        [], [], None, None)
    assert seen.run_test_files and task.fail_to_pass  # the original is left alone
