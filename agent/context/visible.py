"""Which of a task's tests the model may be told of: the one place the context decides it, for
the first prompt and for ranking.

A task without hidden tests (a user's `ooda run`, the examples, QuixBugs, HumanEvalFix) has
tests the user named and the model may read. A benchmark task brings its tests in a hidden
test patch, applied only when verifying (tasks/hidden.py says what is hidden; a blind run's
loop sees `visible_task`, which names none): a test whose file that patch touches exists only
there, or is changed there, and naming it, or ranking by it, would hand the model what only
the judge should see. Such tests are neither shown nor used as a clue, in an oracle run too.
"""

from __future__ import annotations

from ooda.tasks.hidden import hidden_tests
from ooda.tasks.loader import Task


def visible_tests(task: Task) -> list[str]:
    """The failing tests of `task` the model may see, in order, each once: all of them when
    the task has no hidden test patch; else only those that name a test file of the base
    which that patch does not touch (a bare test name, as sympy's ids are, is hidden)."""
    tests = list(dict.fromkeys(task.fail_to_pass))
    if not task.test_patch:
        return tests
    hidden_files = set(hidden_tests(task).files)
    return [t for t in tests
            if ("::" in t or t.endswith(".py")) and test_file(t) not in hidden_files
            and (task.repo / test_file(t)).is_file()]


def test_file(test: str) -> str:
    """The file part of a pytest node id (`tests/test_x.py::test_y[1]` → `tests/test_x.py`)."""
    return test.split("::", 1)[0]
