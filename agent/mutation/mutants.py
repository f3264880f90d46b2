"""The candidates a mutation run proposes, in the order it proposes them: every operator on the
suspicious lines (agent/mutation/operators.py on agent/mutation/localise.py's ranking), ranked
and de-duplicated, then pairs of them on the top lines.

Rank: a mutant's line's suspiciousness times its operator's weight (`WEIGHTS`: an operator that
fixes more of the single-line bugs of the literature's benchmarks weighs more), then the smaller
change first (the smallest change the tests accept is preferred). Two mutants that leave the
file with the same text are one. Pairs come after every single mutant: two mutants of the
`PAIR_POOL` best ones whose changes do not overlap, the pair of better-ranked ones first.
Whether a mutant still parses is checked as it is drawn (`parsing`): a parse of a large file per
mutant made took minutes on a real repository's suspects before the first one was tried.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from ooda.agent.mutation.localise import Suspect
from ooda.agent.mutation.operators import Change, Mutation, apply, mutations

WEIGHTS = {
    "comparison": 1.0, "off_by_one": 0.95, "arithmetic": 0.9, "swap": 0.85, "boolean": 0.85,
    "condition": 0.8, "slice": 0.7, "call": 0.7, "constant": 0.7, "return_value": 0.6,
    "variable": 0.55, "attribute": 0.5, "statement": 0.5, "clamp": 0.45,
}
"""Operator -> how much its mutants' rank keeps of their line's suspiciousness."""
PAIR_POOL = 40
"""Pairs are made of the best this many single mutants."""

ReadFile = Callable[[str], str | None]


@dataclass(frozen=True)
class Mutant:
    """One candidate: one mutation, or two (a pair)."""

    mutations: tuple[Mutation, ...]
    rank: float
    """Higher first."""

    @property
    def description(self) -> str:
        return "; ".join(f"{m.path}:{m.line}: {m.operator}: {m.description}"
                         for m in self.mutations)

    @property
    def size(self) -> int:
        return sum(len(m.change.text) + m.change.end - m.change.start for m in self.mutations)

    def files(self, read: ReadFile) -> dict[str, str]:
        """Path -> the mutated text of each file it changes."""
        changed: dict[str, list[Change]] = {}
        for mutation in self.mutations:
            changed.setdefault(mutation.path, []).append(mutation.change)
        return {path: apply(read(path) or "", changes) for path, changes in changed.items()}


def single_mutants(suspects: Sequence[Suspect], read: ReadFile,
                   deadline: float = math.inf) -> list[Mutant]:
    """Every operator on every suspect line, ranked, one per distinct resulting file; not yet
    checked to parse (`parsing`). Files are read in the order of their best suspect; none is
    begun after `deadline` (time.monotonic)."""
    by_path: dict[str, list[Suspect]] = {}
    for suspect in suspects:
        by_path.setdefault(suspect.path, []).append(suspect)
    ranked: list[tuple[float, int, int, Mutant]] = []
    for path, lines in by_path.items():
        if time.monotonic() > deadline:
            break
        source = read(path)
        if source is None:
            continue
        score = {s.line: s.score for s in lines}
        seen: set[str] = set()
        for mutation in mutations(path, source, [s.line for s in lines], parsing_only=False):
            digest = hashlib.sha256(apply(source, [mutation.change]).encode()).hexdigest()
            if digest in seen:
                continue
            seen.add(digest)
            mutant = Mutant((mutation,), score[mutation.line] * WEIGHTS[mutation.operator])
            ranked.append((-mutant.rank, mutant.size, len(ranked), mutant))
    ranked.sort(key=lambda item: item[:3])
    return [item[3] for item in ranked]


def pairs(singles: Sequence[Mutant], read: ReadFile, pool: int = PAIR_POOL) -> Iterator[Mutant]:
    """Pairs of the `pool` best single mutants that parse whose changes do not overlap, the
    best-ranked pairs first (by the sum of the two ranks' positions), one per distinct result."""
    best = list(itertools.islice(parsing(singles, read), pool))
    order = sorted((i + j, i, j) for i in range(len(best)) for j in range(i + 1, len(best)))
    seen = {_digest(m.files(read)) for m in best}  # (two that undo each other: a single)
    for _, i, j in order:
        first, second = best[i].mutations[0], best[j].mutations[0]
        if first.path == second.path and _overlap(first.change, second.change):
            continue
        mutant = Mutant((first, second), min(best[i].rank, best[j].rank))
        files = mutant.files(read)
        digest = _digest(files)
        if digest in seen or not all(_parses(text) for text in files.values()):
            continue
        seen.add(digest)
        yield mutant


def parsing(mutants: Iterable[Mutant], read: ReadFile) -> Iterator[Mutant]:
    """The mutants whose files still parse, checked one by one as they are drawn."""
    for mutant in mutants:
        if all(_parses(text) for text in mutant.files(read).values()):
            yield mutant


def _digest(files: dict[str, str]) -> str:
    return hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _overlap(a: Change, b: Change) -> bool:
    return a.start < b.end and b.start < a.end or a.start == b.start
