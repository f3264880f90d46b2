"""The reference graph of a repository's code units, and a personalised PageRank over it.

A fix is often not where an issue's words point but one step away: the helper the named
function calls, the base class of the named class, the function that calls the one in the
traceback. The graph joins units (agent/context/units.py) by what their code says:

- a unit that uses a name (a call, an attribute, a bare name) → the definitions of that name
  in its own file or in a module its file imports; a name defined in at most UNIQUE_ANYWHERE
  places counts wherever it is defined; a name with more definitions than MAX_TARGETS is too
  common to say anything (`__init__`, `copy`);
- a class → its base classes (the names of its header, resolved the same way);
- a method and its class's header, both ways.

Edges are kept in both directions (using a definition and being used by it are both
evidence), the reverse one at REVERSE_WEIGHT. The personalised PageRank starts from the units
the task's text points at (their scores as the restart distribution) and spreads their score
along the edges, as Aider's repository map ranks definitions from the files and identifiers
of a chat. The graph is built once per index (edge arrays, cached with it); a query is a few
numpy sums over the edges (numpy's bincount: no graph library needed for one sparse
matrix-vector product per step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ooda.agent.context.units import Unit

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_TARGETS = 12
"""A name defined by more units than this links nothing."""
UNIQUE_ANYWHERE = 2
"""A name defined by at most this many units links to them wherever they are."""
REVERSE_WEIGHT = 0.5
"""The weight of an edge from a definition back to a unit that uses it."""
RESTART = 0.5
"""The chance of going back to the task's own units at each step (higher: the score stays
nearer to where the text pointed)."""
STEPS = 12


@dataclass
class Graph:
    """Weighted directed edges between unit indices (each node's out-weights sum to 1)."""

    size: int
    source: npt.NDArray[np.int32]
    target: npt.NDArray[np.int32]
    weight: npt.NDArray[np.float32]

    @property
    def edges(self) -> int:
        return len(self.source)


def build(units: Sequence[Unit], refs: Sequence[Sequence[str]], imports: dict[str, list[str]],
          bases: dict[int, list[str]], module_of: dict[str, str]) -> Graph:
    """The graph of `units`: refs[k] are the names unit k uses; imports: a file's imported
    dotted names; bases: a class unit's base class names; module_of: a file's module."""
    import numpy as np

    by_name: dict[str, list[int]] = {}
    for k, unit in enumerate(units):
        if unit.kind in ("def", "class"):
            by_name.setdefault(unit.name, []).append(k)
    imported_modules = {path: _modules(names) for path, names in imports.items()}
    edges: dict[tuple[int, int], float] = {}

    def link(a: int, b: int, weight: float) -> None:
        if a != b:
            edges[(a, b)] = edges.get((a, b), 0.0) + weight
            edges[(b, a)] = edges.get((b, a), 0.0) + weight * REVERSE_WEIGHT

    class_of: dict[tuple[str, str], int] = {}
    for k, unit in enumerate(units):
        if unit.kind == "class":
            class_of[(unit.path, unit.qualname)] = k
    linkable = {name: found for name, found in by_name.items() if len(found) <= MAX_TARGETS}
    names = linkable.keys()
    for k, unit in enumerate(units):
        seen = imported_modules.get(unit.path, set())
        for name in names & {*refs[k], *bases.get(k, [])}:  # most names are locals
            found = linkable[name]
            near = [t for t in found if units[t].path == unit.path
                    or module_of.get(units[t].path) in seen]
            chosen = near or (found if len(found) <= UNIQUE_ANYWHERE else [])
            for t in chosen:
                link(k, t, 1.0 / len(chosen))
        if "." in unit.qualname and unit.kind == "def":
            owner = class_of.get((unit.path, unit.qualname.rsplit(".", 1)[0]))
            if owner is not None:
                link(k, owner, 0.5)
    if not edges:
        empty = np.zeros(0, dtype=np.int32)
        return Graph(len(units), empty, empty, np.zeros(0, dtype=np.float32))
    pairs = np.array(list(edges), dtype=np.int32)
    weight = np.array(list(edges.values()), dtype=np.float32)
    out = np.bincount(pairs[:, 0], weights=weight, minlength=len(units))
    weight = (weight / out[pairs[:, 0]]).astype(np.float32)
    return Graph(len(units), pairs[:, 0].copy(), pairs[:, 1].copy(), weight)


def _modules(names: list[str]) -> set[str]:
    """The modules an import list may name: each dotted name and its parents."""
    found: set[str] = set()
    for name in names:
        parts = name.split(".")
        for cut in range(1, len(parts) + 1):
            found.add(".".join(parts[:cut]))
    return found


def pagerank(graph: Graph, seeds: dict[int, float]) -> dict[int, float]:
    """The personalised PageRank of every unit reached from `seeds` (unit → score > 0), the
    seeds' own restart share left out: what the graph adds to them, scaled so the best is 1."""
    import numpy as np

    if not seeds or graph.edges == 0:
        return {}
    restart = np.zeros(graph.size, dtype=np.float64)
    for k, score in seeds.items():
        restart[k] = max(score, 0.0)
    total = restart.sum()
    if total <= 0:
        return {}
    restart /= total
    rank = restart.copy()
    for _ in range(STEPS):
        spread = np.bincount(graph.target, weights=graph.weight * rank[graph.source],
                             minlength=graph.size)
        rank = RESTART * restart + (1 - RESTART) * spread
    added = rank - RESTART * restart
    top = added.max()
    if top <= 0:
        return {}
    found = np.nonzero(added > top * 1e-3)[0]
    return {int(k): float(added[k] / top) for k in found}
