"""Presentation: the ranked files and units shown within a token budget.

Which lines to show is a knapsack: each file's chance to be the one to change (from its score
against the others') times each unit's chance within the file (from its score against its
siblings'), per token it costs. Units are taken best value first until the budget is spent;
a file enters with its imports and its skeleton (the def and class lines of the units not
shown, in line order, each elided run replaced by one marker line, agent/edits/views.py), so
that the model knows what else is there. A file whose shown part would cost nearly as much as
the whole file is shown whole; small files are shown whole from the start.

The result is the prompt's text for each file, the lines shown (for `ooda prompt --json` and
the benchmark), and the `FileView`s the edit parser needs to apply edits to the real files.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ooda.agent.context.index import RepoIndex
from ooda.agent.context.pieces import split_long
from ooda.agent.context.rank import Ranking
from ooda.agent.context.tokens import estimate_chars
from ooda.agent.context.units import Unit
from ooda.agent.edits.views import FileView, marker

SMALL_FILE_TOKENS = 1_500
"""Files up to this size are shown whole when shown at all."""
WHOLE_WHEN_SHOWN = 0.75
"""Show a file whole once its shown part would cost this share of the whole."""
FILE_CHANCE = (-1.18, -1.51, 1.68)
"""The chance that the file ranked r (from 1) with score s, the best file's being top, is one
the fix changes: logistic(a + b·ln r + c·s/top). Fitted on the tuning instances
(bench/context_fit: rank 1 is such a file in about two cases of three, rank 2 in one of
five, rank 5 in one of thirty)."""
UNIT_CHANCE = (-1.32, -0.97, 0.39, 0.11)
"""The chance that a unit of such a file holds a line the fix changes, from its rank r among
the file's units by score, its score s against the file's best, its size in characters c:
logistic(a + b·ln r + c'·s/top + d·ln c) (fitted as FILE_CHANCE: the best unit of the file
in about 45% of cases, the fifth in 12%)."""
UNIT_CHANCE_NONE = -5.7
"""The same for a unit with no evidence at all (before the size term): about 0.6%."""
FILES_CONSIDERED = 30
EPSILON = 0.05
"""A unit without evidence still has this score (so the rest of a likely file has value)."""
MARGIN = 3
"""Lines around a unit shown with it (a change at a unit's edge needs its neighbours)."""
MAX_HEADS = 60
"""A file with more heads than this shows those of its classes, of the neighbours of the
units shown, and of its best scored other units up to this many."""
MARKER_CHARS = 40
TINY_BODY = 2
"""A unit whose head is shown and whose other lines are this few is shown whole (its body
costs about what the marker standing for it would)."""
HEADER_LINES = 45
"""A run of module code at the top of a file longer than this is not shown as its header."""
"""Lines around a unit shown with it (a change at a unit's edge needs its neighbours)."""


@dataclass
class ShownFile:
    """One file of the context."""

    path: str
    ranges: list[tuple[int, int]]
    """The lines shown verbatim (1-based, inclusive), in order."""
    whole: bool
    text: str
    """What the prompt shows (markers for elided runs)."""
    view: FileView
    tokens: int


@dataclass
class Context:
    """What the first prompt shows of the repository."""

    files: list[ShownFile] = field(default_factory=list)
    tokens: int = 0
    ranked: list[tuple[str, float]] = field(default_factory=list)
    """The files the ranking put first with their scores, best first (empty when the
    repository is shown whole): what the benchmark reads the rank of the file to change from."""

    def views(self) -> dict[str, FileView]:
        return {f.path: f.view for f in self.files}


class FilePlan:
    """The units of one file picked so far, and what showing them costs (estimated at unit
    granularity: the rendered text is counted exactly at the end)."""

    def __init__(self, path: str, lines: list[str], units: list[Unit],
                 scores: list[float], first_of: dict[int, int] | None = None) -> None:
        self.path = path
        self.first_of = first_of or {}
        """A later part of a long unit → its first part (agent/context/pieces.py)."""
        self.lines = lines
        self.units = units
        self.scores = scores
        self.picked: set[int] = set()
        self.chars = [sum(len(line) + 1 for line in lines[u.start - 1 : u.end]) for u in units]
        self.whole_tokens = shown_tokens(path, "\n".join(lines))
        self.by_score = sorted(range(len(units)), key=lambda k: -scores[k])
        self.head_chars = [sum(len(line) + 1 for line in lines[u.head[0] - 1 : u.head[1]])
                           + MARKER_CHARS for u in units]
        self.owner = [u.qualname.rsplit(".", 1)[0] if "." in u.qualname else ""
                      for u in units]
        self.always = {k for k, u in enumerate(units)
                       if u.kind == "class" or (u.kind == "def" and not self.owner[k])}
        """Heads shown whatever is picked: classes and top-level functions."""
        self.methods: dict[str, set[int]] = {}
        for k, u in enumerate(units):
            if u.kind == "def" and self.owner[k]:
                self.methods.setdefault(self.owner[k], set()).add(k)
        self.header_chars = sum(self.chars[k] for k, u in enumerate(units) if is_header(k, u))
        for k, u in enumerate(units[:2]):
            if (imports := header_imports(k, u, lines)) is not None:
                self.header_chars += sum(len(line) + 1
                                         for line in lines[imports[0] - 1 : imports[1]])

    def heads(self, picked: set[int]) -> set[int]:
        """The units whose head is shown: classes, top-level functions and the methods of a
        class with a unit picked (of a long file: its classes, the neighbours of the picked
        units and its best scored other units, MAX_HEADS in all)."""
        wanted = set(self.always) | {self.first_of[k] for k in picked if k in self.first_of}
        for owner in {self.owner[self.first_of.get(k, k)] for k in picked}:
            wanted |= self.methods.get(owner, set())
        if len(wanted) > MAX_HEADS:
            near = {n for k in picked for n in (k - 1, k + 1)}
            keep = {k for k in wanted if self.units[k].kind == "class" or k in near}
            room = MAX_HEADS - len(keep)
            for k in self.by_score:
                if room <= 0:
                    break
                if k in wanted and k not in keep and k not in picked:
                    keep.add(k)
                    room -= 1
            wanted = keep
        return wanted - picked

    def cost(self, picked: set[int]) -> int:
        """Tokens of the file shown with `picked` in full (estimated: the opening statements,
        the picked units, the heads, and a marker line for each run of elided lines)."""
        if not picked:
            return 0
        if len(picked) == len(self.units):
            return self.whole_tokens
        chars = len(self.path) + 16 + self.header_chars
        chars += sum(self.chars[k] for k in picked
                     if not is_header(k, self.units[k]))
        chars += sum(self.head_chars[k] for k in self.heads(picked))
        chars += MARKER_CHARS * (len(picked) + 1)
        return estimate_chars(chars)


def present(index: RepoIndex, ranking: Ranking, budget: int,
            must: list[str] | None = None) -> Context:
    """The files and lines worth showing within `budget` tokens (best first); `must`: files
    shown whole before anything else when they fit (the tests a user named)."""
    plans: dict[str, FilePlan] = {}
    order: list[str] = []
    spent = 0
    unit_score = {(index.units[k].path, index.units[k].start): s
                  for k, s in ranking.units.items()}

    def plan_of(path: str) -> FilePlan:
        if path not in plans:
            lines = (index.text_of(path) or "").splitlines()
            units, scores, first_of = split_long(
                index.units_of(path),
                [unit_score.get((path, u.start), 0.0) for u in index.units_of(path)],
                lines, ranking.terms)
            plans[path] = FilePlan(path, lines, units, [s + EPSILON for s in scores],
                                   first_of)
        return plans[path]

    for path in must or []:
        if path not in index.files:
            continue
        plan = plan_of(path)
        if spent + plan.whole_tokens <= budget:
            plan.picked = set(range(len(plan.units)))
            order.append(path)
            spent += plan.whole_tokens
    values = _values(ranking, plan_of)
    queue = [(-value / max(8, estimate_chars(plans[path].chars[k])), path, k)
             for path, chances in values.items() for k, value in enumerate(chances)]
    heapq.heapify(queue)
    while queue:
        bid, path, k = heapq.heappop(queue)
        plan = plans[path]
        if k in plan.picked:
            continue
        before = plan.cost(plan.picked)
        picked = plan.picked | {k}
        after = plan.cost(picked)
        if plan.whole_tokens <= SMALL_FILE_TOKENS or after >= WHOLE_WHEN_SHOWN * (
                plan.whole_tokens):
            picked = set(range(len(plan.units)))
            after = plan.whole_tokens
        if spent - before + after > budget:
            continue
        # what it really adds per token it really costs (a file's first unit brings its
        # skeleton; a small file comes whole): worse than the next offer, it waits its turn
        ratio = sum(values[path][j] for j in picked - plan.picked) / max(1, after - before)
        if queue and ratio < -queue[0][0] and -ratio != bid:
            heapq.heappush(queue, (-ratio, path, k))
            continue
        if not plan.picked:  # its skeleton is paid: its other units cost only themselves now
            order.append(path)
            for j, value in enumerate(values[path]):
                if j not in picked:
                    heapq.heappush(queue, (-value / max(8, estimate_chars(plan.chars[j])),
                                           path, j))
        plan.picked = picked
        spent += after - before
    position = {path: k for k, (path, _) in enumerate(ranking.files)}
    shown = [p for p in order if p in (must or [])]  # the named tests, then best first
    shown += sorted((p for p in order if p not in shown),
                    key=lambda p: position.get(p, len(position)))
    return _fit(shown, plans, budget)


def _fit(order: list[str], plans: dict[str, FilePlan], budget: int) -> Context:
    """Render the plans; while the exact count exceeds the budget, drop the last file's
    least valuable unit (the estimate at unit granularity can be a little short)."""
    while True:
        context = Context()
        for path in order:
            plan = plans[path]
            shown = render(path, plan.lines, plan.units, plan.picked, plan.heads(plan.picked))
            context.files.append(shown)
            context.tokens += shown.tokens
        if context.tokens <= budget or not order:
            return context
        last = plans[order[-1]]
        if len(last.picked) <= 1:
            order.pop()
            continue
        worst = min(last.picked, key=lambda k: last.scores[k] / max(1, last.chars[k]))
        last.picked = last.picked - {worst}


def _values(ranking: Ranking, plan_of: Callable[[str], FilePlan]) -> dict[str, list[float]]:
    """For each unit of the top files: the file's chance to be one the fix changes times the
    unit's chance to hold a changed line (what showing it is worth)."""
    files = ranking.files[:FILES_CONSIDERED]
    values: dict[str, list[float]] = {}
    for (path, _), chance in zip(files, file_chances(files), strict=True):
        plan = plan_of(path)
        values[path] = [chance * c for c in unit_chances(plan.scores, plan.chars)]
    return values


def file_chances(files: list[tuple[str, float]]) -> list[float]:
    """FILE_CHANCE of each ranked file."""
    if not files:
        return []
    a, b, c = FILE_CHANCE
    top = files[0][1] or 1.0
    return [_logistic(a + b * math.log(r) + c * score / top)
            for r, (_, score) in enumerate(files, start=1)]


def unit_chances(scores: list[float], chars: list[int]) -> list[float]:
    """UNIT_CHANCE of each unit of a file (scores with EPSILON added, as FilePlan keeps them)."""
    a, b, c, d = UNIT_CHANCE
    evidence = [s - EPSILON for s in scores]
    order = sorted((k for k, e in enumerate(evidence) if e > 0), key=lambda k: -evidence[k])
    rank = {k: r for r, k in enumerate(order, start=1)}
    top = max(evidence, default=0.0) or 1.0
    out: list[float] = []
    for k, e in enumerate(evidence):
        size = d * math.log(max(chars[k], 20))
        if k in rank:
            out.append(_logistic(a + b * math.log(rank[k]) + c * e / top + size))
        else:
            out.append(_logistic(UNIT_CHANCE_NONE + size))
    return out


def _logistic(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def shown_tokens(path: str, text: str) -> int:
    """What a file shown as `text` costs the prompt: its path line, the fence and the text."""
    return estimate_chars(len(path) + len(text) + 16)


def is_header(k: int, unit: Unit) -> bool:
    """The file's opening statements (docstring, imports; up to two runs of module code before
    the first definition), shown with any part of the file: a fix often adds an import."""
    return k <= 1 and unit.qualname == "<module>" and unit.lines <= HEADER_LINES


def header_imports(k: int, unit: Unit, lines: list[str]) -> tuple[int, int] | None:
    """Of an opening run too long to be a header (a licence, a long docstring): the lines of
    its imports with MARGIN around them, when they are at most HEADER_LINES."""
    if k > 1 or unit.qualname != "<module>" or unit.lines <= HEADER_LINES:
        return None
    found = [n for n in range(unit.start, unit.end + 1)
             if lines[n - 1].startswith(("import ", "from "))]
    if not found:
        return None
    last = found[-1]
    while last < unit.end and lines[last].startswith((" ", "\t", ")")):
        last += 1  # the rest of a parenthesised import
    start, end = max(unit.start, found[0] - MARGIN), min(unit.end, last + MARGIN)
    return (start, end) if end - start + 1 <= HEADER_LINES else None


def shown_lines(units: list[Unit], picked: set[int], heads: set[int], lines: list[str]
                ) -> set[int]:
    """The line numbers shown: the picked units with MARGIN lines around them, the heads
    (decorators, def or class line, signature) of `heads` (a tiny unit whole), and the
    file's opening statements (of a long opening run, its imports)."""
    shown: set[int] = set()
    n_lines = len(lines)
    for k, unit in enumerate(units):
        if k in picked:
            shown.update(range(max(1, unit.start - MARGIN), min(n_lines, unit.end + MARGIN) + 1))
        elif k in heads and unit.lines <= unit.head[1] - unit.head[0] + 1 + TINY_BODY:
            shown.update(range(unit.start, unit.end + 1))  # no dearer than head and marker
        elif k in heads:
            shown.update(range(unit.head[0], unit.head[1] + 1))
        elif is_header(k, unit):
            shown.update(range(unit.start, unit.end + 1))
        elif (imports := header_imports(k, unit, lines)) is not None:
            shown.update(range(imports[0], imports[1] + 1))
    return {n for n in shown if 1 <= n <= n_lines}


def render(path: str, lines: list[str], units: list[Unit], picked: set[int],
           heads: set[int]) -> ShownFile:
    """The file with only the picked units in full, and the heads of `heads`."""
    n = len(lines)
    if len(picked) == len(units):
        text = "\n".join(lines)
        view = FileView(path, tuple(lines))
        return ShownFile(path, [(1, n)] if n else [], True, text, view,
                         shown_tokens(path, text))
    shown = shown_lines(units, picked, heads, lines)
    out: list[str] = []
    hidden: dict[tuple[int, int], tuple[str, ...]] = {}
    ranges: list[tuple[int, int]] = []
    number = 1
    while number <= n:
        start = number
        visible = number in shown
        while number <= n and (number in shown) == visible:
            number += 1
        end = number - 1
        if visible:
            out += lines[start - 1 : end]
            ranges.append((start, end))
        else:
            out.append(marker(start, end, _indent(lines, start, end)))
            hidden[(start, end)] = tuple(lines[start - 1 : end])
    text = "\n".join(out)
    return ShownFile(path, ranges, False, text, FileView(path, tuple(out), hidden),
                     shown_tokens(path, text))


def _indent(lines: list[str], start: int, end: int) -> str:
    """The indentation of the first non-blank line of an elided run."""
    for line in lines[start - 1 : end]:
        if line.strip():
            return line[: len(line) - len(line.lstrip())]
    return ""
