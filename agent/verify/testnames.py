"""Which files of a repository hold its tests, as its own runner names them: pytest's
`python_files` patterns from the repository's configuration (pytest.ini, pyproject.toml's
[tool.pytest.ini_options], tox.ini's [pytest], setup.cfg's [tool:pytest], read in pytest's
order: the first that has the section wins), else pytest's default `test_*.py *_test.py`; and
django's `tests.py` modules. Used to choose a blind run's regression tests (regression.py).
Pure: reads the repository's configuration files.
"""

from __future__ import annotations

import configparser
import fnmatch
import tomllib
from pathlib import Path, PurePosixPath

DEFAULT_PATTERNS = ("test_*.py", "*_test.py")
ALWAYS = ("tests.py",)
"""django's test modules (its runner finds them by name, whatever pytest would)."""
SUBJECT_AFFIXES = (("unittest_", ""), ("tests_", ""), ("test_", ""), ("", "_tests"),
                   ("", "_test"))
"""What test file names put around the name of the module they test (astroid's unittest_X)."""


def collected_patterns(repo: Path) -> tuple[str, ...]:
    """The file name patterns of `repo`'s test modules."""
    for read in (_pytest_ini, _pyproject, _tox_ini, _setup_cfg):
        found = read(repo)
        if found is not None:
            return tuple(found.split()) or DEFAULT_PATTERNS
    return DEFAULT_PATTERNS


def is_test_module(path: str, patterns: tuple[str, ...] = DEFAULT_PATTERNS) -> bool:
    """Whether the file `path` (repo-relative) is a test module by those patterns."""
    name = PurePosixPath(path).name
    if not name.endswith(".py") or name in ("conftest.py", "__init__.py"):
        return False
    return name in ALWAYS or any(fnmatch.fnmatchcase(name, p) for p in patterns)


def subject(path: str) -> str:
    """The module name a test file is named after (`unittest_brain.py` → `brain`,
    `calc_test.py` → `calc`), or its stem when it names none."""
    stem = PurePosixPath(path).stem
    for prefix, suffix in SUBJECT_AFFIXES:
        if stem.startswith(prefix) and stem.endswith(suffix) and \
                len(stem) > len(prefix) + len(suffix):
            return stem[len(prefix): len(stem) - len(suffix)] if suffix else stem[len(prefix):]
    return stem


def _ini_option(path: Path, section: str) -> str | None:
    if not path.is_file():
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, UnicodeDecodeError, OSError):
        return None
    if not parser.has_section(section):
        return None
    return parser.get(section, "python_files", fallback="")


def _pytest_ini(repo: Path) -> str | None:
    for name in ("pytest.ini", ".pytest.ini"):
        found = _ini_option(repo / name, "pytest")
        if found is not None:
            return found
    return None


def _pyproject(repo: Path) -> str | None:
    try:
        data = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        return None
    options = data.get("tool", {}).get("pytest", {}).get("ini_options")
    if not isinstance(options, dict):
        return None
    value = options.get("python_files", "")
    return " ".join(value) if isinstance(value, list) else str(value)


def _tox_ini(repo: Path) -> str | None:
    return _ini_option(repo / "tox.ini", "pytest")


def _setup_cfg(repo: Path) -> str | None:
    return _ini_option(repo / "setup.cfg", "tool:pytest")
