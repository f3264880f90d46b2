"""Which Python a plain repository's tests want, from its own files (environment detection).

Signals, strongest first: `.python-version` (pyenv, uv), pyproject's `requires-python`,
setup.cfg's `python_requires`, setup.py's `python_requires=` (a literal), tox.ini's envlist
(`py39`, `py{38,39}-django32`). Each one narrows the versions allowed; the choice is among
the Pythons the Debian releases of releases.toml ship (3.9 bullseye, 3.11 bookworm, 3.13
trixie...): ooda's own 3.11 when allowed, else the highest allowed. When the signals
contradict one another, the weakest are dropped until some version fits (and the description
says which were ignored); a version no release ships but releases.toml maps (3.10) is kept as
wanted. Version specifiers are parsed by `packaging` (PEP 440), the files by tomllib,
configparser and ast, so nothing here runs the repository's code.
"""

from __future__ import annotations

import ast
import configparser
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet

from ooda.agent.sandbox.environments import releases
from ooda.agent.sandbox.image import PYTHON_VERSION

DEFAULT_PYTHON = PYTHON_VERSION
"""ooda's own image's Python: a repository that allows it needs no other."""


@dataclass(frozen=True)
class Signal:
    """One file's say on the Python version."""

    source: str
    """What it said, for the description ("requires-python >=3.9,<3.10")."""
    allows: Callable[[str], bool]
    """Whether a "major.minor" version is allowed."""


@dataclass(frozen=True)
class PythonChoice:
    """The Python picked and why."""

    version: str
    why: str
    """The signals it satisfies, and those ignored ("" when there were none)."""


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def _pythons() -> tuple[list[str], list[str]]:
    """(the Pythons the releases ship, the Pythons releases.toml maps to a release)."""
    served, wanted = releases.pythons()
    return sorted(served, key=_vkey), sorted(wanted, key=_vkey)


def specifier_signal(source: str, text: str) -> Signal | None:
    """A signal from a PEP 440 specifier (None if it does not parse). A minor version is
    allowed when the specifier admits its first or a late patch release (`>=3.9.2` allows
    3.9; `<3.10` allows 3.9)."""
    try:
        spec = SpecifierSet(text)
    except InvalidSpecifier:
        return None
    return Signal(f"{source} {text.strip()}",
                  lambda v: spec.contains(v, prereleases=True)
                  or spec.contains(f"{v}.99", prereleases=True))


def python_signals(repo: Path, pyproject: dict[str, Any], setup_cfg: configparser.ConfigParser,
                   setup_py: dict[str, Any], tox: configparser.ConfigParser) -> list[Signal]:
    """Every signal the repository's files give, strongest first."""
    signals: list[Signal] = []
    pinned = _python_version_file(repo)
    if pinned is not None:
        signals.append(Signal(f".python-version {pinned}", lambda v: v == pinned))
    texts = [
        ("requires-python", (pyproject.get("project") or {}).get("requires-python")),
        ("setup.cfg python_requires", setup_cfg.get("options", "python_requires",
                                                     fallback=None)),
        ("setup.py python_requires", setup_py.get("python_requires")),
    ]
    for source, text in texts:
        if isinstance(text, str) and text.strip():
            signal = specifier_signal(source, text)
            if signal is not None:
                signals.append(signal)
    listed = tox_pythons(tox.get("tox", "envlist", fallback=""))
    if listed:
        signals.append(Signal(f"tox envlist {','.join(sorted(listed, key=_vkey))}",
                              lambda v: v in listed))
    return signals


def _python_version_file(repo: Path) -> str | None:
    """The "major.minor" of .python-version's first version line (3.9.18, cpython-3.9)."""
    try:
        text = (repo / ".python-version").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        found = re.match(r"^\s*(?:cpython-|python)?(\d+)\.(\d+)", line)
        if found:
            return f"{found.group(1)}.{found.group(2)}"
    return None


def tox_pythons(envlist: str) -> set[str]:
    """The Pythons a tox envlist names (`py39`, `py3.9`, `py{38,39}-lint` -> 3.8, 3.9)."""
    found: set[str] = set()
    for item in re.split(r"[,\s]+(?![^{]*\})", envlist):
        for env in _expand_braces(item.strip()):
            for factor in env.split("-"):
                match = re.fullmatch(r"py(3)\.?(\d+)", factor)
                if match:
                    found.add(f"{match.group(1)}.{match.group(2)}")
    return found


def _expand_braces(text: str) -> list[str]:
    """`py{38,39}-x` -> ["py38-x", "py39-x"] (tox's generative names)."""
    match = re.search(r"\{([^{}]*)\}", text)
    if match is None:
        return [text] if text else []
    head, tail = text[:match.start()], text[match.end():]
    return [e for part in match.group(1).split(",")
            for e in _expand_braces(head + part.strip() + tail)]


def choose_python(signals: list[Signal]) -> PythonChoice | None:
    """The Python to build on (None: no signal, ooda's default serves)."""
    if not signals:
        return None
    served, wanted = _pythons()
    active = list(signals)
    while active:
        for pool in (served, wanted):
            fits = [v for v in pool if all(s.allows(v) for s in active)]
            if fits:
                version = DEFAULT_PYTHON if DEFAULT_PYTHON in fits else max(fits, key=_vkey)
                why = ", ".join(s.source for s in active)
                ignored = signals[len(active):]
                if ignored:
                    why += "; ignored, as it conflicts: " + ", ".join(s.source for s in ignored)
                return PythonChoice(version, why)
        active.pop()
    return PythonChoice(DEFAULT_PYTHON, f"no release in releases.toml serves {signals[0].source}")


def setup_py_literals(repo: Path) -> dict[str, Any]:
    """The literal keyword arguments of setup.py's `setup(...)` call (read with ast, never
    run); a keyword whose value is not a literal maps to None."""
    path = repo / "setup.py"
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                node.func, "attr", None)) == "setup":
            found: dict[str, Any] = {}
            for keyword in node.keywords:
                if keyword.arg is None:
                    continue
                try:
                    found[keyword.arg] = ast.literal_eval(keyword.value)
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    found[keyword.arg] = None
            return found
    return {}
