"""Test support files: code outside the test directories that the tests rely on to judge the
code under test (assertion helpers, fixtures, pytest plugins). A candidate that rewrites
`pkg/testing.py` so that `assert_close` always returns makes every test that uses it pass,
so the edit policy protects these files like the tests themselves.

By rule, a path is test support when one of its parts is named like a testing module or
package — `testing.py`, `_testing.py`, `testutils.py`, `pytest_plugin.py`, or anything under
a `testing/`, `_testing/`, `testutils/` directory (numpy.testing, pandas._testing,
xarray.testing, sphinx.testing, ...); test files, `tests/` and conftest.py are protected by
agent/verify/workspace.py already. A task adds its own paths with task.toml's `protected` list, in
.gitignore syntax (the `pathspec` library, the matcher git users know); a `!pattern` there
lets the candidate edit a file the rule would protect (when the fix belongs in a helper).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

import pathspec

RULE = (
    "testing.py",
    "_testing.py",
    "testutils.py",
    "_testutils.py",
    "pytest_plugin.py",
    "testing/",
    "_testing/",
    "testutils/",
)
"""What is test support by rule, in .gitignore syntax (a name matches at any depth)."""


@lru_cache(maxsize=64)
def _spec(patterns: tuple[str, ...]) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines([*RULE, *patterns])


def check_patterns(patterns: Sequence[str]) -> str | None:
    """Why task.toml's `protected` patterns are unusable (None when they are fine)."""
    for pattern in patterns:
        if not pattern.strip() or pattern.strip() == "!":
            return "holds an empty pattern"
        if "\0" in pattern:
            return f"{pattern!r} holds a NUL character"
    try:
        _spec(tuple(patterns))
    except Exception as exc:  # pathspec raises several types for a malformed pattern
        return f"a pattern is not valid .gitignore syntax: {exc}"
    return None


def is_test_support(path: str, patterns: Sequence[str] = ()) -> bool:
    """True when the repo-relative POSIX `path` is test support (by rule or by `patterns`)."""
    return bool(_spec(tuple(patterns)).match_file(path))


def support_reason(path: str, patterns: Sequence[str] = ()) -> str | None:
    """Why a candidate may not touch `path` as test support (None when it may)."""
    if not is_test_support(path, patterns):
        return None
    return (
        f"{path}: this is test support (helpers the tests use to judge the code); edits to it "
        "are not part of a solution, so change the code under test instead"
    )
