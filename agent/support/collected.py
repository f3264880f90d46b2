"""Which files a repository's own pytest run collects as tests, read from its configuration, so
that the edit policy and the integrity check protect what the run really collects, not a list
of names: `python_files` (Django-style `tests.py`, `*_tests.py`, `check_*.py`), the doctest
text files (`--doctest-glob`, pytest's default `test*.txt`), `--doctest-modules` (the examples
in the code's docstrings are tests), and the files of the task's required test ids.

The configuration is found as pytest finds it in the repository root: pytest.ini, .pytest.ini,
pyproject.toml (`[tool.pytest.ini_options]`, pytest 9's `[tool.pytest]`), tox.ini (`[pytest]`),
setup.cfg (`[tool:pytest]`). Those files are themselves protected (agent/contracts/policy.py).
"""

from __future__ import annotations

import ast
import configparser
import doctest
import shlex
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

DEFAULT_PYTHON_FILES = ("test_*.py", "*_test.py")
DEFAULT_DOCTEST_GLOBS = ("test*.txt",)


@dataclass(frozen=True)
class Collected:
    """What the run collects as tests, as .gitignore patterns, and the doctest modules."""

    patterns: tuple[str, ...] = ()
    """Test files: `python_files` globs (any depth), doctest text globs, required ids' files."""
    doctest_modules: bool = False
    """`--doctest-modules` is on: docstring examples of the code are tests."""
    doctest_files: tuple[str, ...] = ()
    """Source modules whose doctests the task's required ids name (`pkg/mod.py::pkg.mod.f`)."""
    doctest_globs: tuple[str, ...] = DEFAULT_DOCTEST_GLOBS


def pytest_options(repo: Path) -> dict[str, str]:
    """The repository's pytest ini options (empty when it has none, or they cannot be read)."""
    for name in ("pytest.ini", ".pytest.ini"):
        found = _ini(repo / name, "pytest")
        if found is not None:
            return found
    pyproject = _toml(repo / "pyproject.toml")
    if pyproject is not None:
        return pyproject
    for name, section in (("tox.ini", "pytest"), ("setup.cfg", "tool:pytest")):
        found = _ini(repo / name, section)
        if found is not None:
            return found
    return {}


def _ini(path: Path, section: str) -> dict[str, str] | None:
    if not path.is_file() or path.is_symlink():
        return None
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"))
    except configparser.Error:
        return None
    if not parser.has_section(section):
        return {} if path.name.endswith("pytest.ini") else None
    return dict(parser.items(section))


def _toml(path: Path) -> dict[str, str] | None:
    if not path.is_file() or path.is_symlink():
        return None
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    pytest = data.get("tool", {}).get("pytest", None)
    if not isinstance(pytest, dict):
        return None
    options = pytest.get("ini_options", pytest)
    if not isinstance(options, dict):
        return None
    return {
        key: " ".join(map(str, value)) if isinstance(value, list) else str(value)
        for key, value in options.items()
    }


def _words(value: str) -> list[str]:
    try:
        return shlex.split(value)
    except ValueError:
        return value.split()


def collected(
    repo: Path, ids: Sequence[str] = (), files: Sequence[str] = (), test_cmd: str | None = None
) -> Collected:
    """What `repo`'s pytest collects as tests, with the task's required `ids`, its test `files`
    and its test command (whose options count as the configuration's)."""
    options = pytest_options(repo)
    python_files = _words(options.get("python_files", "")) or list(DEFAULT_PYTHON_FILES)
    patterns = [p if "/" not in p else f"**/{p}" for p in python_files]
    addopts = _words(options.get("addopts", "")) + _words(test_cmd or "")
    globs: list[str] = []
    doctest_modules = False
    for index, word in enumerate(addopts):
        if word == "--doctest-modules":
            doctest_modules = True
        elif word.startswith("--doctest-glob="):
            globs.append(word.split("=", 1)[1])
        elif word == "--doctest-glob" and index + 1 < len(addopts):
            globs.append(addopts[index + 1])
    doctest_globs = tuple(globs) or DEFAULT_DOCTEST_GLOBS
    doctest_files = []
    for test_id in ids:
        path = test_id.split("::", 1)[0]
        if not _safe(path) or not (repo / path).is_file():
            continue  # (a file only the hidden tests add is not named: it would tell them)
        if "::" in test_id and path.endswith(".py"):
            item = test_id.split("::", 2)[1].split("[", 1)[0]
            if "." in item:  # `pkg/mod.py::pkg.mod.f`: a doctest (no test name holds a dot)
                doctest_files.append(path)
            else:  # a test file, whatever its name (pytest collects a file it is given)
                patterns.append("/" + path)
        elif path.endswith(".py"):
            patterns.append("/" + path)
    patterns += ["/" + f for f in files if _safe(f)]
    return Collected(
        patterns=tuple(dict.fromkeys(patterns)),
        doctest_modules=doctest_modules,
        doctest_files=tuple(dict.fromkeys(doctest_files)),
        doctest_globs=doctest_globs,
    )


def _safe(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts and "\n" not in path


# --------------------------------------------------------------------------- doctest examples


def examples(text: str, module: bool) -> dict[str, list[tuple[str, str]]]:
    """The doctest examples of a module (per docstring, by the qualified name of what holds
    it) or of a text file (one entry), as (source, expected output) pairs."""
    parser = doctest.DocTestParser()
    found: dict[str, list[tuple[str, str]]] = {}

    def add(name: str, doc: str | None) -> None:
        if not doc or ">>>" not in doc:
            return
        try:
            pairs = [(e.source, e.want) for e in parser.get_examples(doc)]
        except ValueError:  # a malformed example: the whole text stands for it
            pairs = [(doc, "")]
        if pairs:
            found[name] = pairs

    if not module:
        add("", text)
        return found
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return found
    stack: list[tuple[str, ast.AST]] = [("", tree)]
    while stack:
        prefix, node = stack.pop()
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            add(prefix or "<module>", ast.get_docstring(node, clean=False))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                stack.append((f"{prefix}.{child.name}" if prefix else child.name, child))
    return found


def changed_examples(before: str, after: str, module: bool) -> list[str]:
    """Where `after` changes or removes doctest examples that `before` holds (new ones may be
    added): the names of the docstrings (or "" for a text file)."""
    old, new = examples(before, module), examples(after, module)
    return [name for name, pairs in old.items() if new.get(name) != pairs]


def doctest_changes(
    base: Path, workspace: Path, changed: Sequence[str], tests: Collected, every_module: bool
) -> list[str]:
    """The changed files whose existing doctest examples the change alters or removes, as
    `path (where)` phrases: modules whose doctests the required ids name, every code module
    when `every_module` (a test command run with `--doctest-modules`), and the doctest text
    files the run collects."""
    from fnmatch import fnmatchcase

    found = []
    for path in changed:
        name = PurePosixPath(path).name
        if path.endswith(".py"):
            if path not in tests.doctest_files and not (every_module and tests.doctest_modules):
                continue
            module = True
        elif any(fnmatchcase(name, glob) for glob in tests.doctest_globs):
            module = False
        else:
            continue
        before = _read(base / path)
        if before is None or ">>>" not in before:
            continue
        after = _read(workspace / path) or ""
        where = changed_examples(before, after, module)
        if where:
            found.append(f"{path} ({', '.join(w or 'its examples' for w in where[:3])})")
    return found


def _read(path: Path) -> str | None:
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
