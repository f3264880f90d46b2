"""Ranking mutants (agent/mutation/mutants.py): suspiciousness times operator weight, one per
resulting file, pairs after singles and never overlapping."""

from __future__ import annotations

import ast
from dataclasses import replace

from ooda.agent.mutation.localise import Suspect
from ooda.agent.mutation.mutants import Mutant, pairs, parsing, single_mutants
from ooda.agent.mutation.operators import Change

FILES = {
    "m.py": "def mid(a, lo, hi):\n    m = (lo + hi) // 2\n    if a[m] == 0:\n        return m\n"
            "    return -1\n",
}


def read(path: str) -> str | None:
    return FILES.get(path)


def test_singles_follow_the_suspects_and_are_distinct() -> None:
    singles = single_mutants([Suspect("m.py", 3, 1.0), Suspect("m.py", 2, 0.5)], read)
    results = [m.files(read)["m.py"] for m in singles]
    assert len(results) == len(set(results))
    assert singles[0].mutations[0].line == 3 and singles[0].mutations[0].operator == "comparison"
    ranks = [m.rank for m in singles]
    assert ranks == sorted(ranks, reverse=True)
    assert all(m.mutations[0].line in (2, 3) for m in singles)
    assert single_mutants([Suspect("gone.py", 1, 1.0)], read) == []
    assert single_mutants([Suspect("m.py", 3, 1.0)], read, deadline=0.0) == []  # (past it)


def test_pairs_combine_two_singles_without_overlap() -> None:
    singles = single_mutants([Suspect("m.py", 2, 1.0), Suspect("m.py", 3, 1.0)], read)
    found = list(pairs(singles, read, pool=10))
    assert found and all(len(p.mutations) == 2 for p in found)
    texts = [p.files(read)["m.py"] for p in found]
    assert len(texts) == len(set(texts))
    for text in texts:
        ast.parse(text)
    first = found[0].mutations
    assert {first[0].change.start, first[1].change.start} != {first[0].change.start}
    assert "m.py:2:" in found[0].description or "m.py:3:" in found[0].description


def test_a_mutant_that_does_not_parse_is_dropped_as_it_is_drawn() -> None:
    files = {"k.py": "def f(a):\n    return a.b\n"}
    singles = single_mutants([Suspect("k.py", 2, 1.0)], files.get)
    assert singles
    drawn = list(parsing(singles, files.get))
    assert drawn and all(ast.parse(m.files(files.get)["k.py"]) for m in drawn)
    broken = Mutant((replace(singles[0].mutations[0], change=Change(0, 3, "de f")),), 1.0)
    assert list(parsing([broken, *singles], files.get)) == drawn
