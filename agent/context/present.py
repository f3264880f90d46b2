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

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ooda.agent.context.index import RepoIndex
from ooda.agent.context.rank import Ranking
from ooda.agent.context.tokens import estimate_chars
from ooda.agent.context.units import Unit
from ooda.agent.edits.views import FileView, marker

SMALL_FILE_TOKENS = 1_500
"""Files up to this size are shown whole when shown at all."""
WHOLE_WHEN_SHOWN = 0.75
"""Show a file whole once its shown part would cost this share of the whole."""
TEMPERATURE = 0.15
"""How sharply the file scores turn into chances (lower: the top file gets more)."""
RANK_SHARE = 0.3
"""The share of the files' chances given by rank alone (halving from one file to the next):
a hedge against a confident score on the wrong file."""
RANK_DECAY = 0.5
FILES_CONSIDERED = 30
EPSILON = 0.05
"""A unit without evidence still has this score (so the rest of a likely file has value)."""
PRIOR = 0.6
"""The share of a file's chance spread over its units by size, not by evidence (a change is
often where nothing in the task points)."""
MARGIN = 3
"""Lines around a unit shown with it (a change at a unit's edge needs its neighbours)."""
MAX_HEADS = 60
"""A file with more heads than this shows only those of classes, of units with evidence and
of the neighbours of the units shown."""
MARKER_CHARS = 40
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
    ranked: list[str] = field(default_factory=list)
    """The files the ranking put first, best first (empty when the repository is shown
    whole): what the benchmark reads the rank of the file to change from."""

    def views(self) -> dict[str, FileView]:
        return {f.path: f.view for f in self.files}


class FilePlan:
    """The units of one file picked so far, and what showing them costs (estimated at unit
    granularity; the rendered text is counted exactly at the end)."""

    def __init__(self, path: str, lines: list[str], units: list[Unit],
                 scores: list[float]) -> None:
        self.path = path
        self.lines = lines
        self.units = units
        self.scores = scores
        self.picked: set[int] = set()
        self.chars = [sum(len(line) + 1 for line in lines[u.start - 1 : u.end]) for u in units]
        self.whole_tokens = shown_tokens(path, "\n".join(lines))

    def heads(self, picked: set[int]) -> set[int]:
        """The units whose head is shown: classes, top-level functions and the methods of a
        class with a unit picked (of a long file: classes, units with evidence and the
        neighbours of the picked ones)."""
        open_classes = {self.units[k].qualname.rsplit(".", 1)[0] for k in picked}
        wanted = {k for k, u in enumerate(self.units) if u.kind == "class" or (
            u.kind == "def" and ("." not in u.qualname
                                 or u.qualname.rsplit(".", 1)[0] in open_classes))}
        if len(wanted) > MAX_HEADS:
            near = {n for k in picked for n in (k - 1, k + 1)}
            wanted = {k for k in wanted if self.units[k].kind == "class"
                      or self.scores[k] > EPSILON or k in near}
        return wanted - picked

    def cost(self, picked: set[int]) -> int:
        """Tokens of the file shown with `picked` in full (estimated)."""
        if not picked:
            return 0
        if len(picked) == len(self.units):
            return self.whole_tokens
        heads = self.heads(picked)
        chars = len(self.path) + 16
        hidden_run = False
        for k, unit in enumerate(self.units):
            if k in picked:
                chars += self.chars[k]
                hidden_run = False
            elif is_header(k, unit):
                chars += self.chars[k]
                hidden_run = False
            elif k in heads:
                chars += sum(
                    len(line) + 1 for line in self.lines[unit.head[0] - 1 : unit.head[1]])
                chars += MARKER_CHARS
                hidden_run = True
            elif not hidden_run:
                chars += MARKER_CHARS
                hidden_run = True
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
            units = index.units_of(path)
            scores = [unit_score.get((path, u.start), 0.0) + EPSILON for u in units]
            plans[path] = FilePlan(path, (index.text_of(path) or "").splitlines(), units,
                                   scores)
        return plans[path]

    for path in must or []:
        if path not in index.files:
            continue
        plan = plan_of(path)
        if spent + plan.whole_tokens <= budget:
            plan.picked = set(range(len(plan.units)))
            order.append(path)
            spent += plan.whole_tokens
    for _, path, k in _candidates(ranking, plan_of):
        plan = plan_of(path)
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
        if not plan.picked:
            order.append(path)
        plan.picked = picked
        spent += after - before
    return _fit(order, plans, budget)


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


def _candidates(ranking: Ranking, plan_of: Callable[[str], FilePlan]
                ) -> list[tuple[float, str, int]]:
    """(value per token, path, unit index in its file) for the units of the top files, best
    first: the file's chance (its score against the others', mixed with its rank) times the
    unit's share of the file (by evidence and by size), per token."""
    files = ranking.files[:FILES_CONSIDERED]
    if not files:
        return []
    top = files[0][1]
    soft = [math.exp((score - top) / TEMPERATURE) for _, score in files]
    geo = [RANK_DECAY ** r for r in range(len(files))]
    soft_total, geo_total = sum(soft), sum(geo)
    weights = [(1 - RANK_SHARE) * s / soft_total + RANK_SHARE * g / geo_total
               for s, g in zip(soft, geo, strict=True)]
    total = sum(weights)
    out: list[tuple[float, str, int]] = []
    for (path, _), weight in zip(files, weights, strict=True):
        plan = plan_of(path)
        evidence = sum(s - EPSILON for s in plan.scores) or 1.0
        size = sum(plan.chars) or 1
        for k, score in enumerate(plan.scores):
            tokens = max(8, estimate_chars(plan.chars[k]))
            share = ((1 - PRIOR) * (score - EPSILON) / evidence
                     + PRIOR * plan.chars[k] / size)
            out.append((weight / total * share / tokens, path, k))
    out.sort(key=lambda row: -row[0])
    return out


def shown_tokens(path: str, text: str) -> int:
    """What a file shown as `text` costs the prompt: its path line, the fence and the text."""
    return estimate_chars(len(path) + len(text) + 16)


def is_header(k: int, unit: Unit) -> bool:
    """The file's opening statements (docstring, imports; up to two runs of module code before
    the first definition), shown with any part of the file: a fix often adds an import."""
    return k <= 1 and unit.qualname == "<module>" and unit.lines <= HEADER_LINES


def shown_lines(units: list[Unit], picked: set[int], heads: set[int], n_lines: int
                ) -> set[int]:
    """The line numbers shown: the picked units with MARGIN lines around them, the heads
    (decorators, def or class line, signature) of `heads`, and the file's first imports."""
    shown: set[int] = set()
    for k, unit in enumerate(units):
        if k in picked:
            shown.update(range(max(1, unit.start - MARGIN), min(n_lines, unit.end + MARGIN) + 1))
        elif k in heads:
            shown.update(range(unit.head[0], unit.head[1] + 1))
        elif is_header(k, unit):
            shown.update(range(unit.start, unit.end + 1))
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
    shown = shown_lines(units, picked, heads, n)
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
