"""The names the edit policy protects: files and directories that decide how tests and tools run.

The workspace's patch policy refuses edits to them and the pytest integrity check fingerprints
them; both read these sets from here.
"""

from __future__ import annotations

import sys

RESERVED_DIRS = frozenset({".git", ".ooda"})
"""Directories a patch may never touch (.ooda holds the verifiers' own reports)."""

TEST_DIRS = frozenset({"tests", "test"})
TEST_FILE_PATTERNS = ("test_*.py", "*_test.py")
CONFIG_NAMES = frozenset(
    {
        "pytest.ini",
        ".pytest.ini",
        "pytest.toml",
        ".pytest.toml",
        "tox.ini",
        "setup.cfg",
        "pyproject.toml",
        "mypy.ini",
        ".mypy.ini",
        "mypy.toml",
        "ruff.toml",
        ".ruff.toml",
        ".coveragerc",
        "sitecustomize.py",
        "usercustomize.py",
    }
)
TOOL_MODULES = frozenset(
    "pytest _pytest py pluggy iniconfig packaging ruff mypy mypyc mypy_extensions "
    "typing_extensions junitparser pathspec pygments tomli".split()
)
"""Modules the verifiers import in the sandbox: a new top-level module may not shadow them."""
SHADOWED = TOOL_MODULES | frozenset(sys.stdlib_module_names)
