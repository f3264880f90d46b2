"""Detect a plain repository's test environment from its own files: the `[environment]` table
`ooda run` and `ooda ci` build when a task names none (see docs/TASKS.md, "Detected
environments").

Pure: it reads files (pyproject.toml, setup.cfg, setup.py and noxfile.py through ast,
requirements files, tox.ini, .python-version) and never runs the repository's code. It answers the table as data
plus one short description of what it found, or None when ooda's own image serves: nothing to
install (no dependencies, nothing but pytest/ruff/mypy versions ooda's image has, no src
layout, no compiled extension) and Python 3.11 allowed. What it installs, as a developer
would: the project itself (`pip install -e .`, with the test extra `test`/`tests`/`testing`/
`dev` when one is declared, or tox's `extras`), requirements files (tox's `deps` when tox.ini
has them, its factor lines for the environment tox would run with the chosen Python; else the
noxfile's test session's `session.install(...)`; else requirements.txt and the first test
requirements file found, tests/requirements*.txt included), a test dependency group (PEP 735)
and tox's or nox's plain requirements as pinned pip packages; pytest and the pytest
plugins those name become the runner's packages (installed last so their pins win; the image's
installed plugins are then loaded with `-p`). Requirement strings are parsed with `packaging`.
"""

from __future__ import annotations

import configparser
import functools
import os
import re
import shlex
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from ooda.agent.sandbox.image import toolchain_pins
from ooda.tasks.detect_python import (
    DEFAULT_PYTHON,
    PythonChoice,
    choose_python,
    python_signals,
    setup_py_literals,
)
from ooda.tasks.nox_deps import nox_deps
from ooda.tasks.requirement_lines import expand_braces, read_requirements, tox_deps

TEST_NAMES = ("test", "tests", "testing", "dev")
"""Extras and dependency groups that hold a project's test dependencies, preferred in order."""
TEST_FILES = (
    "requirements-test.txt", "requirements-tests.txt", "requirements_test.txt",
    "requirements_tests.txt", "requirements-testing.txt", "test-requirements.txt",
    "test_requirements.txt", "tests-requirements.txt", "requirements/test.txt",
    "requirements/tests.txt", "requirements/testing.txt", "requirements-dev.txt",
    "requirements_dev.txt", "dev-requirements.txt", "dev_requirements.txt",
    "requirements/dev.txt", "requirements/development.txt",
    "tests/requirements.txt", "test/requirements.txt", "testing/requirements.txt",
    "tests/requirements-test.txt", "tests/requirements/test.txt", "tests/requirements/tests.txt",
)
"""Test requirements files, preferred in order (test before dev); the first found is used."""
TEST_GLOBS = ("tests/requirements*.txt", "test/requirements*.txt", "testing/requirements*.txt",
              "requirements/test*.txt", "requirements*test*.txt")
"""Where a test requirements file not named above is looked for (sorted, first found)."""
APT = ("python3-tk", "python3-venv", "git")
"""Debian packages every detected environment gets, as a normal machine has them: tkinter and
ensurepip (Debian splits them out of python3; tests import them or skip), git (tests call it)."""
CATALOG_APT = ("gettext",)
"""Added when the repository holds gettext catalogs (*.po): its tests compile or update them
with xgettext/msgmerge/msgfmt, and skip without them (humanize's test_update_translations)."""
SKIP_DIRS = frozenset({".git", ".hg", ".tox", ".nox", ".venv", "venv", "node_modules", "build",
                       "dist", "__pycache__"})
BASE_FILE = "requirements.txt"
COMPILED_BACKENDS = ("cython", "scikit-build", "meson-python", "maturin", "setuptools-rust")
"""Build requirements that mean the install compiles something."""
UNKNOWN = "<unreadable>"
"""Stands for dependencies detection cannot read (dynamic, poetry's table): something to
install."""


@dataclass(frozen=True)
class Detected:
    """A detected environment."""

    table: dict[str, Any]
    """The `[environment]` table (EnvSpec fields)."""
    description: str
    """What was found, in one short line."""


@dataclass
class _Project:
    """What the repository's packaging files say about installing it."""

    installable: bool = False
    name: str | None = None
    """Its distribution name, normalized."""
    src_layout: bool = False
    compiled: bool = False
    dependencies: list[str] = field(default_factory=list)
    extras: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, list[Any]] = field(default_factory=dict)


def detect_environment(repo: Path) -> Detected | None:
    """The environment `repo`'s tests need, or None when ooda's own image serves them."""
    pyproject = _toml(repo / "pyproject.toml")
    setup_cfg = _ini(repo / "setup.cfg")
    tox = _ini(repo / "tox.ini")
    setup_py = setup_py_literals(repo) if (repo / "setup.py").is_file() else {}
    python = choose_python(python_signals(repo, pyproject, setup_cfg, setup_py, tox))
    version = python.version if python else DEFAULT_PYTHON
    project = _project(repo, pyproject, setup_cfg, setup_py)
    install_project = project.installable and tox.get(
        "testenv", "skip_install", fallback="false").strip().lower() not in ("true", "1", "yes")
    extras = _extras(project, tox)
    group = next((n for n in TEST_NAMES if n in project.groups), None)
    group_specs = _group(project.groups, group) if group else []
    deps_text = tox.get("testenv", "deps", fallback=None)
    tox_lines = tox_deps(deps_text, _tox_factors(tox, version),
                         lambda name, key: tox.get(name, key, fallback=None)) \
        if deps_text else None
    nox = nox_deps(repo) if tox_lines is None else None
    if tox_lines is not None:
        files = [f for f in dict.fromkeys(tox_lines.files) if (repo / f).is_file()]
        tox_specs = [s for s in tox_lines.specs if s not in (".", "./")]
    elif nox is not None and (nox.files or nox.specs):
        files = [f for f in dict.fromkeys(nox.files) if (repo / f).is_file()]
        tox_specs = list(nox.specs)
        extras = extras or [e for e in nox.extras if e in project.extras]
    else:
        test_file = _test_file(repo)
        files = [f for f in (BASE_FILE, test_file)
                 if f is not None and (repo / f).is_file()]
        tox_specs = []
    if install_project and project.name:  # `astropy[test]` in astropy's own tox deps
        tox_specs, extras = _fold_self(project.name, tox_specs, extras)
        group_specs, extras = _fold_self(project.name, group_specs, extras)
    extra_specs = [s for e in extras for s in project.extras.get(e, [])]
    file_specs = [s for f in files for s in read_requirements(repo, f)]
    test_specs = tox_specs + group_specs + extra_specs + file_specs
    runner = _runner_packages(test_specs)
    wanted = (project.dependencies if install_project else []) + test_specs
    needs = (
        (python is not None and python.version != DEFAULT_PYTHON)
        or (install_project and (project.src_layout or project.compiled))
        or any(not _served_by_ooda(spec, version) for spec in wanted)
    )
    if not needs:
        return None
    pip = [_normal(s) for s in tox_specs + group_specs if not _is_runner(s)]
    command = ["python3", "-m", "pip", "install"]
    if install_project:
        command += ["-e", f".[{','.join(extras)}]" if extras else "."]
    for rel in files:
        command += ["-r", rel]
    apt = [*APT, *(CATALOG_APT if _has_catalogs(repo) else ())]
    table: dict[str, Any] = {"python": version, "apt": apt}
    if pip:
        table["pip"] = pip
    table["install"] = shlex.join(command) if len(command) > 4 else ""
    table["runner"] = {"packages": runner}
    return Detected(table, _describe(python, install_project, extras, files, tox_lines is not None,
                                     group, pip, runner))


def _has_catalogs(repo: Path) -> bool:
    """Whether the repository holds a gettext catalog (a *.po file), virtual envs and build
    output left out."""
    for _root, dirs, files in os.walk(repo):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        if any(name.endswith(".po") for name in files):
            return True
    return False


def _test_file(repo: Path) -> str | None:
    """The repository's test requirements file: the first of TEST_FILES, else of TEST_GLOBS."""
    for name in TEST_FILES:
        if (repo / name).is_file() and not (repo / name).is_symlink():
            return name
    for pattern in TEST_GLOBS:
        for path in sorted(repo.glob(pattern)):
            if path.is_file() and not path.is_symlink():
                return path.relative_to(repo).as_posix()
    return None


def _tox_factors(tox: configparser.ConfigParser, python: str) -> frozenset[str]:
    """The factors of the tox environment a developer would run with `python`: the first
    envlist entry holding its `pyXY` factor (or a bare `py`/`py3`), with the Python's own."""
    major, _, minor = python.partition(".")
    own = {"py", f"py{major}", f"py{major}{minor}", f"py{major}.{minor}"}
    envlist = tox.get("tox", "envlist", fallback="")
    for entry in (e for raw in re.split(r"[,\n](?![^{]*\})", envlist) if raw.strip()
                  for e in expand_braces(raw.strip())):
        parts = set(entry.split("-"))
        if parts & own:
            return frozenset(parts | own)
    return frozenset(own)


def _toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError):
        return {}


def _ini(path: Path) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(path.read_text(encoding="utf-8", errors="replace"), str(path))
    except (OSError, configparser.Error):
        return configparser.ConfigParser(interpolation=None)
    return parser


def _lines(value: str) -> list[str]:
    return [line.strip() for line in value.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _project(repo: Path, pyproject: dict[str, Any], setup_cfg: configparser.ConfigParser,
             setup_py: dict[str, Any]) -> _Project:
    meta = pyproject.get("project") or {}
    found = _Project(installable=(repo / "setup.py").is_file() or "project" in pyproject
                     or "build-system" in pyproject)
    name = meta.get("name") or setup_cfg.get("metadata", "name", fallback=None) \
        or setup_py.get("name")
    found.name = canonicalize_name(name) if isinstance(name, str) and name.strip() else None
    if isinstance(meta.get("dependencies"), list):
        found.dependencies += [str(d) for d in meta["dependencies"]]
    if "dependencies" in (meta.get("dynamic") or []):
        found.dependencies.append(UNKNOWN)
    poetry = ((pyproject.get("tool") or {}).get("poetry") or {}).get("dependencies") or {}
    if set(poetry) - {"python"}:
        found.dependencies.append(UNKNOWN)
    for name, specs in (meta.get("optional-dependencies") or {}).items():
        found.extras[str(name)] = [str(s) for s in specs] if isinstance(specs, list) else []
    groups = pyproject.get("dependency-groups") or {}
    found.groups = {str(k): list(v) for k, v in groups.items() if isinstance(v, list)}
    requires = setup_cfg.get("options", "install_requires", fallback="")
    found.dependencies += [UNKNOWN] if requires.strip().startswith("file:") else _lines(requires)
    if setup_cfg.has_section("options.extras_require"):
        for name, value in setup_cfg.items("options.extras_require"):
            found.extras.setdefault(name, _lines(value))
    if "install_requires" in setup_py:
        value = setup_py["install_requires"]
        found.dependencies += (_lines(value) if isinstance(value, str) else
                               [str(v) for v in value] if isinstance(value, list | tuple)
                               else [UNKNOWN])
    if isinstance(setup_py.get("extras_require"), dict):
        for name, value in setup_py["extras_require"].items():
            found.extras.setdefault(str(name), _lines(value) if isinstance(value, str)
                                    else [str(v) for v in value]
                                    if isinstance(value, list | tuple) else [UNKNOWN])
    found.src_layout = _has_src_layout(repo)
    build = " ".join(str(r) for r in (pyproject.get("build-system") or {}).get("requires", []))
    found.compiled = ("ext_modules" in setup_py or "ext-modules" in (
        (pyproject.get("tool") or {}).get("setuptools") or {})
        or any(b in build.lower() for b in COMPILED_BACKENDS))
    return found


def _has_src_layout(repo: Path) -> bool:
    """Code under src/ (a package or a module), which imports only once installed."""
    src = repo / "src"
    try:
        return src.is_dir() and any(
            (child / "__init__.py").is_file() or child.suffix == ".py"
            for child in src.iterdir())
    except OSError:
        return False


def _extras(project: _Project, tox: configparser.ConfigParser) -> list[str]:
    """tox's `extras` when it names some, else the first test extra declared."""
    named = [e for e in _lines(tox.get("testenv", "extras", fallback="").replace(",", "\n"))
             if e in project.extras]
    if named:
        return named
    wanted = {str(canonicalize_name(n)): n for n in project.extras}
    return next(([wanted[n]] for n in TEST_NAMES if n in wanted), [])


def _fold_self(name: str, specs: list[str], extras: list[str]) -> tuple[list[str], list[str]]:
    """Requirements on the project itself (`pkg[test]`) become extras of its own install
    rather than a copy from the index."""
    kept: list[str] = []
    extras = list(extras)
    for spec in specs:
        if _name(spec) == name:
            extras += sorted(e for e in Requirement(spec).extras if e not in extras)
        else:
            kept.append(spec)
    return kept, extras


def _group(groups: dict[str, list[Any]], name: str, depth: int = 0) -> list[str]:
    """A dependency group's requirements, its `{include-group = ...}` entries expanded."""
    specs: list[str] = []
    for item in groups.get(name, []):
        if isinstance(item, str):
            specs.append(item)
        elif isinstance(item, dict) and isinstance(item.get("include-group"), str) \
                and depth < 8:
            specs += _group(groups, item["include-group"], depth + 1)
    return specs


def _name(spec: str) -> str | None:
    try:
        return canonicalize_name(Requirement(spec).name)
    except InvalidRequirement:
        return None


def _normal(spec: str) -> str:
    """A requirement as packaging writes it (`pytest-mock  ==3.12.0` -> `pytest-mock==3.12.0`);
    anything else (a URL, a path) as given."""
    try:
        return str(Requirement(spec))
    except InvalidRequirement:
        return spec


def _is_runner(spec: str) -> bool:
    name = _name(spec)
    return name is not None and (name == "pytest" or name.startswith("pytest-"))


def _runner_packages(specs: list[str]) -> list[str]:
    """pytest and its plugins as the tests' dependencies name them (first mention wins);
    pytest itself, unpinned, when none names it."""
    found: dict[str, str] = {}
    for spec in specs:
        if _is_runner(spec):
            found.setdefault(_name(spec) or spec, _normal(spec))
    if "pytest" not in found:
        found = {"pytest": "pytest", **found}
    return list(found.values())


def _served_by_ooda(spec: str, python: str) -> bool:
    """Whether ooda's own image already satisfies `spec`: a pytest, ruff or mypy requirement
    its pinned version meets, or one whose marker excludes `python`."""
    if spec == UNKNOWN:
        return False
    try:
        requirement = Requirement(spec)
    except InvalidRequirement:
        return False  # a URL or a path: something to install
    if requirement.marker is not None and not requirement.marker.evaluate(
            {"python_version": python, "python_full_version": f"{python}.0", "extra": ""}):
        return True
    have = _ooda_pins().get(canonicalize_name(requirement.name))
    return have is not None and requirement.specifier.contains(have, prereleases=True)


@functools.cache
def _ooda_pins() -> dict[str, str]:
    """pytest, ruff and mypy in ooda's image: their versions on this host (image.py)."""
    return dict(p.split("==", 1) for p in toolchain_pins() if "==" in p)


def _describe(python: PythonChoice | None, install_project: bool, extras: list[str],
              files: list[str], from_tox: bool, group: str | None, pip: list[str],
              runner: list[str]) -> str:
    parts = [f"Python {python.version} ({python.why})" if python else f"Python {DEFAULT_PYTHON}"]
    if install_project:
        parts.append("pip install -e " + (f".[{','.join(extras)}]" if extras else "."))
    parts += files
    if group:
        parts.append(f"dependency group {group!r}")
    if pip:
        parts.append(("tox deps " if from_tox else "pip ") + _few(pip))
    if runner != ["pytest"]:
        parts.append(_few(runner))
    return ", ".join(parts)


def _few(items: list[str], shown: int = 3) -> str:
    """`a b c +4 more`: the line stays short."""
    more = f" +{len(items) - shown} more" if len(items) > shown else ""
    return " ".join(items[:shown]) + more
