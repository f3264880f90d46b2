"""Feedback that widens the view: when a failure names code the model was not shown (a
traceback frame in a unit it saw only as a signature, or not at all; a module a test could not
import a name from), the next round shows that code.

`widen(repo, views, failure)` returns the excerpts to add to the feedback message and the
lines they reveal (so that whole-file answers may change them). Test files are never shown:
a failure's frames in tests are the verifier's to report, and a hidden test stays hidden.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ooda.agent.context.clues import read_clues
from ooda.agent.context.index import is_test_file, list_python, module_name
from ooda.agent.context.present import render
from ooda.agent.context.tokens import estimate
from ooda.agent.context.units import cut
from ooda.agent.edits.views import FileView, Views

WIDEN_TOKENS = 3_000
"""Most tokens of code one feedback message adds."""
MAX_EXCERPTS = 4
_IMPORT_FROM = re.compile(r"cannot import name '(\w+)' from '([\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"module '([\w.]+)' has no attribute '(\w+)'")


@dataclass
class Widening:
    """Code to add to a feedback message, and the lines of each file it reveals."""

    text: str = ""
    revealed: dict[str, set[int]] = field(default_factory=dict)


def widen(repo: Path, views: Views, failure: str,
          budget: int = WIDEN_TOKENS) -> Widening:
    """The excerpts of the code `failure` names that `views` did not show (best first)."""
    wanted = _wanted(repo, failure)
    out = Widening()
    parts: list[str] = []
    spent = 0
    for path, line, name in wanted:
        if len(parts) >= MAX_EXCERPTS:
            break
        try:  # a file in another encoding is shown as the index reads it (edits refuse it)
            text = (repo / path).read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        lines = text.splitlines()
        units = cut(path, text, module_name(path)).units
        picked = {k for k, u in enumerate(units)
                  if (line and u.start <= line <= u.end) or (name and u.name == name)}
        if not picked:
            continue
        seen = _seen(views.get(path), len(lines)) | out.revealed.get(path, set())
        needed = {n for k in picked for n in range(units[k].start, units[k].end + 1)}
        if needed <= seen:
            continue
        shown = render(path, lines, units, picked, set())
        cost = estimate(shown.text)
        if spent + cost > budget:
            continue
        spent += cost
        parts.append(f"{path}\n```python\n{shown.text}\n```")
        out.revealed.setdefault(path, set()).update(
            n for start, end in shown.ranges for n in range(start, end + 1))
    if parts:
        out.text = ("Code named in this failure that you had not been shown (elided lines are "
                    "marked as before):\n\n" + "\n".join(parts))
    return out


def _seen(view: FileView | None, n_lines: int) -> set[int]:
    if view is None:
        return set()
    return set(range(1, n_lines + 1)) - view.hidden_lines()


def _wanted(repo: Path, failure: str) -> list[tuple[str, int, str | None]]:
    """(path, line or 0, name or None) of the repository's own non-test code the failure
    names: traceback frames (innermost first), then names a test could not import."""
    sources = [p for p in list_python(repo) if not is_test_file(p)]
    by_suffix = {p: p.split("/") for p in sources}
    modules = {module_name(p): p for p in sources}
    found: list[tuple[str, int, str | None]] = []
    for frame in reversed(read_clues(failure).frames):
        path = _resolve(frame.path, by_suffix)
        if path is not None:
            found.append((path, frame.line, frame.function))
    for pattern, swap in ((_IMPORT_FROM, True), (_NO_ATTRIBUTE, False)):
        for match in pattern.finditer(failure):
            name, module = (match.group(1), match.group(2)) if swap else (
                match.group(2), match.group(1))
            path = modules.get(module)
            if path is not None:
                found.append((path, 0, name))
    return list(dict.fromkeys(found))


def _resolve(written: str, by_suffix: dict[str, list[str]]) -> str | None:
    parts = written.replace("\\", "/").split("/")
    best, best_len = None, 0
    for path, own in by_suffix.items():
        common = 0
        while common < min(len(parts), len(own)) and parts[-1 - common] == own[-1 - common]:
            common += 1
        if common == len(own) and common > best_len:
            best, best_len = path, common
    return best


__all__ = ["Widening", "widen"]
