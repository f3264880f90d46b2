"""What a repository's noxfile installs for its tests, read with ast (never run).

A nox session that runs pytest installs its test dependencies with `session.install(...)`:
requirement strings, `"-r", "requirements/test.txt"`, `"-e", ".[test]"`. The session read is
the first one named test/tests/unit/pytest, else the first whose body runs pytest. Only
literal strings count; anything computed is left out (and said by the caller's description
only through what was found).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PREFERRED = ("test", "tests", "unit", "unittests", "pytest")


@dataclass
class NoxDeps:
    """A session's literal installs."""

    session: str
    files: list[str] = field(default_factory=list)
    """Requirements files (`-r FILE`), relative to the repository."""
    specs: list[str] = field(default_factory=list)
    """Requirement strings (the project itself, `.` or `-e .`, left out)."""
    extras: list[str] = field(default_factory=list)
    """Extras of the project's own install (`.[test]`)."""


def nox_deps(repo: Path) -> NoxDeps | None:
    """The test session's installs of `repo`'s noxfile.py, or None (no noxfile, no session)."""
    try:
        tree = ast.parse((repo / "noxfile.py").read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None
    sessions = [node for node in tree.body
                if isinstance(node, ast.FunctionDef) and _is_session(node)]
    chosen = next((s for name in PREFERRED for s in sessions if s.name == name), None)
    chosen = chosen or next((s for s in sessions if _runs_pytest(s)), None)
    if chosen is None:
        return None
    found = NoxDeps(chosen.name)
    for call in ast.walk(chosen):
        if isinstance(call, ast.Call) and _method(call) == "install":
            _read_install([a.value for a in call.args
                           if isinstance(a, ast.Constant) and isinstance(a.value, str)], found)
    return found


def _is_session(node: ast.FunctionDef) -> bool:
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(target, ast.Attribute) and target.attr in ("session", "parametrize"):
            return True
    return False


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _runs_pytest(node: ast.FunctionDef) -> bool:
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and _method(call) == "run" and call.args:
            first = call.args[0]
            if isinstance(first, ast.Constant) and first.value in ("pytest", "py.test"):
                return True
    return False


def _read_install(args: list[str], found: NoxDeps) -> None:
    index = 0
    while index < len(args):
        arg = args[index]
        if arg in ("-r", "--requirement") and index + 1 < len(args):
            found.files.append(args[index + 1])
            index += 2
            continue
        if arg.startswith("-r") and len(arg) > 2:
            found.files.append(arg[2:].strip())
        elif arg in ("-e", "--editable") or arg.startswith("-"):
            pass
        elif arg in (".", "./") or arg.startswith((".[", "./[")):
            inside = arg.partition("[")[2].rstrip("]")
            found.extras += [e.strip() for e in inside.split(",") if e.strip()]
        else:
            found.specs.append(arg)
        index += 1
