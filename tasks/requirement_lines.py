"""What a repository's requirements files and tox `deps` ask pip for (environment detection).

Reads pip's requirements-file format as pip does for the parts detection needs: comments,
line continuations, `-r`/`--requirement` includes (followed, relative to the including file,
each file once), editable and URL lines (kept as things to install), and pip options (index
URLs, `-c` constraints, hashes), skipped. tox.ini's `[testenv] deps` are the same lines plus
`{toxinidir}`; factor-conditional lines (`py39: mock`) and `{[section]deps}` references are
left out. The requirement strings themselves are parsed later with `packaging`.
"""

from __future__ import annotations

import re
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


def tox_deps(value: str) -> Lines:
    """tox `deps` lines: files it includes (relative to tox.ini) and requirement strings."""
    kept = []
    for line in _logical_lines(value):
        line = re.sub(r"\{toxinidir\}[/\\]?", "", line)
        if re.match(r"^[\w.!-]+(?:\s*,\s*[\w.!-]+)*\s*:\s", line) or "{" in line:
            continue  # `py39: mock` (one env's factor) or `{[base]deps}` (a reference)
        kept.append(line)
    return parse_lines("\n".join(kept))
