"""What a repository's requirements files and tox `deps` ask pip for (environment detection).

Reads pip's requirements-file format as pip does for the parts detection needs: comments,
line continuations, `-r`/`--requirement` includes (followed, relative to the including file,
each file once), editable and URL lines (kept as things to install), and pip options (index
URLs, `-c` constraints, hashes), skipped. tox.ini's `[testenv] deps` are the same lines plus
`{toxinidir}`, factor-conditional lines (`py{38,39}: mock`, `!py27-cov: x`: kept when the
factors of the environment tox would run match) and `{[section]key}` references (followed in
the same file). The requirement strings themselves are parsed later with `packaging`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

MAX_DEPTH = 8
"""`-r` includes followed at most this deep."""


@dataclass
class Lines:
    """What some requirements lines ask for."""

    files: list[str] = field(default_factory=list)
    """Requirements files named by `-r` (relative to the repository, as written)."""
    specs: list[str] = field(default_factory=list)
    """Requirement strings, editable paths and URLs, in order."""


def _logical_lines(text: str) -> list[str]:
    """Lines with comments removed and `\\` continuations joined."""
    text = re.sub(r"\\\r?\n", " ", text)
    out = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line:
            out.append(line)
    return out


def _option(line: str, short: str, long: str) -> str | None:
    """The value of `-r FILE`, `-rFILE`, `--requirement FILE` or `--requirement=FILE`."""
    match = re.match(rf"^(?:{short}|{long})(?:\s*=\s*|\s+|(?<={short}))(\S.*)$", line)
    return match.group(1).strip() if match else None


def parse_lines(text: str) -> Lines:
    """The includes and requirements of requirements-file text (not following includes)."""
    found = Lines()
    for line in _logical_lines(text):
        included = _option(line, "-r", "--requirement")
        if included is not None:
            found.files.append(included)
            continue
        editable = _option(line, "-e", "--editable")
        if editable is not None:
            found.specs.append(editable)
            continue
        if line.startswith("-"):
            continue  # --index-url, -c constraints, --hash, --pre: how, not what
        found.specs.append(re.split(r"\s+--", line, maxsplit=1)[0])  # `--hash=...` after it
    return found


def read_requirements(repo: Path, rel: str) -> list[str]:
    """Every requirement `rel` asks for, its `-r` includes followed (missing ones skipped)."""
    specs: list[str] = []
    seen: set[Path] = set()

    def visit(path: Path, depth: int) -> None:
        try:
            resolved = path.resolve()
            if resolved in seen or depth > MAX_DEPTH or not resolved.is_relative_to(
                    repo.resolve()):
                return
            seen.add(resolved)
            text = resolved.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        lines = parse_lines(text)
        specs.extend(lines.specs)
        for included in lines.files:
            visit(path.parent / included, depth + 1)

    visit(repo / rel, 0)
    return specs


_FACTOR_LINE = re.compile(r"^([\w.!{}-]+(?:\s*,\s*[\w.!{}-]+)*)\s*:\s+(.+)$")
_REFERENCE = re.compile(r"^\{\[([^\]]+)\]([\w-]+)\}$")


def expand_braces(text: str) -> list[str]:
    """tox's brace expansion: `py{38,39}-dj{3,4}` -> py38-dj3, py38-dj4, py39-dj3, py39-dj4."""
    parts = re.split(r"(\{[^{}]*\})", text)
    choices = [p[1:-1].split(",") if p.startswith("{") and p.endswith("}") else [p]
               for p in parts]
    return ["".join(c.strip() for c in combo) for combo in itertools.product(*choices)]


def factors_match(condition: str, factors: Collection[str]) -> bool:
    """Whether a deps line's condition (`py38,py39-cov`, `!py27`) holds for an environment
    with `factors`: any comma-separated alternative whose `-`-joined factors all hold."""
    for alternative in expand_braces(condition):
        for option in alternative.split(","):
            needed = [f for f in option.strip().split("-") if f]
            if needed and all((f[1:] not in factors) if f.startswith("!") else (f in factors)
                              for f in needed):
                return True
    return False


def tox_deps(value: str, factors: Collection[str] = (),
             section: Callable[[str, str], str | None] | None = None) -> Lines:
    """tox `deps` lines: files it includes (relative to tox.ini) and requirement strings;
    a factor line counts when its condition holds for `factors`, a `{[section]key}`
    reference is read through `section(name, key)` (None: left out)."""
    return parse_lines("\n".join(_tox_lines(value, factors, section, 0)))


def _tox_lines(value: str, factors: Collection[str],
               section: Callable[[str, str], str | None] | None, depth: int) -> list[str]:
    kept: list[str] = []
    for line in _logical_lines(value):
        line = re.sub(r"\{toxinidir\}[/\\]?", "", line)
        if reference := _REFERENCE.match(line):
            text = section(reference.group(1), reference.group(2)) if section else None
            if text and depth < MAX_DEPTH:
                kept += _tox_lines(text, factors, section, depth + 1)
            continue
        if conditional := _FACTOR_LINE.match(line):
            if factors_match(conditional.group(1), factors):
                line = conditional.group(2).strip()
            else:
                continue
        if "{" in line:
            continue  # another substitution tox makes at run time
        kept.append(line)
    return kept
