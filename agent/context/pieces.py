"""Long units shown in parts: the part of a 300-line function that the task's words point at.

A unit is the smallest thing the presentation buys, so a long function or class body (a
`doit`, a `make_response`, a checker's message table) costs thousands of tokens and is often
left out as a whole, though the task points at a few lines of it. Such a unit is cut here into
parts of about PART_LINES lines at the lines where a statement of its body begins; the first
part keeps the unit's name and head (its def line), the others are runs of its code. Each part
gets a share of the unit's score by the task's terms it holds (each term weighted by how few
of the unit's parts hold it), so the presentation can show the head and the matching part with
a marker for the rest.
"""

from __future__ import annotations

import math
from dataclasses import replace

from ooda.agent.context.units import Unit
from ooda.agent.context.words import identifier_terms, identifiers

LONG_UNIT_LINES = 60
"""A unit longer than this is cut into parts."""
PART_LINES = 25
"""The least lines of a part (the last may be longer: no part shorter than half this)."""
PART_FLOOR = 0.4
"""What a part that holds none of the task's terms keeps of the unit's score."""
_OPENERS = ("(", "[", "{", ",", "\\", ":", "+", "-", "*", "/", "=", "and", "or")
_CLOSERS = (")", "]", "}", ".", "else", "elif", "except", "finally", '"""', "'''", "#", "@")


def split_long(units: list[Unit], scores: list[float], lines: list[str],
               task_terms: list[str]) -> tuple[list[Unit], list[float], dict[int, int]]:
    """`units` with each long one the task points at replaced by its parts, their scores, and
    each later part's index → its first part's index (whose head shows where it belongs)."""
    wanted = set(task_terms)
    out_units: list[Unit] = []
    out_scores: list[float] = []
    first_of: dict[int, int] = {}
    for unit, score in zip(units, scores, strict=True):
        parts = _cut(unit, lines) if score > 0 and unit.qualname != "<module>" else [unit]
        shares = _shares(parts, lines, wanted)
        first = len(out_units)
        for n, (part, share) in enumerate(zip(parts, shares, strict=True)):
            if n:
                first_of[len(out_units)] = first
            out_units.append(part)
            out_scores.append(score * share)
    return out_units, out_scores, first_of


def _cut(unit: Unit, lines: list[str]) -> list[Unit]:
    """The unit's parts (the unit itself when it is not long)."""
    if unit.lines <= LONG_UNIT_LINES:
        return [unit]
    body_start = max(unit.start, unit.head[1] + 1)
    indent = _body_indent(lines, body_start, unit.end)
    cuts: list[int] = []
    last = unit.start
    in_string = False  # inside a triple-quoted string (a docstring) at the line's start
    for number in range(body_start, unit.end + 1):
        if (not in_string and number > body_start and number - last >= PART_LINES
                and unit.end - number + 1 >= PART_LINES // 2
                and _starts_statement(lines, number, indent)):
            cuts.append(number)
            last = number
        line = lines[number - 1]
        if (line.count('"""') + line.count("'''")) % 2:
            in_string = not in_string
    if not cuts:
        return [unit]
    bounds = [unit.start, *cuts, unit.end + 1]
    parts = [replace(unit, end=bounds[1] - 1)]
    parts += [Unit(unit.path, f"{unit.qualname}.<part>", "code", a, b - 1, (0, -1))
              for a, b in zip(bounds[1:-1], bounds[2:], strict=True)]
    return parts


def _body_indent(lines: list[str], start: int, end: int) -> int:
    for line in lines[start - 1 : end]:
        if line.strip():
            return len(line) - len(line.lstrip())
    return 0


def _starts_statement(lines: list[str], number: int, indent: int) -> bool:
    """A line of the body's first two levels where a statement begins (not a continuation)."""
    line = lines[number - 1]
    text = line.strip()
    if not text or len(line) - len(line.lstrip()) > indent + 4 or text.startswith(_CLOSERS):
        return False
    before = next((lines[k].rstrip() for k in range(number - 2, -1, -1) if lines[k].strip()),
                  "")
    return not before.endswith(_OPENERS)


def _shares(parts: list[Unit], lines: list[str], wanted: set[str]) -> list[float]:
    """Each part's share of its unit's score: PART_FLOOR, plus the rest by the task's terms
    it holds (rare among the parts counts more), against the best part's."""
    if len(parts) == 1:
        return [1.0]
    held = [{t for word in identifiers("\n".join(lines[p.start - 1 : p.end]))
             for t in identifier_terms(word)} & wanted for p in parts]
    weight = {t: math.log(1 + len(parts) / sum(t in h for h in held))
              for h in held for t in h}
    matched = [sum(weight[t] for t in h) for h in held]
    best = max(matched) or 1.0
    return [PART_FLOOR + (1 - PART_FLOOR) * m / best for m in matched]
