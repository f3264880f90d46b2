"""Fault localisation: which lines of the code under test the failing tests point at, best first.

Two signals, from one traced run of the tests on the unpatched code (agent/contracts/spectrum.py,
made in the sandbox by verifiers/coverage):
- the spectrum: a line the failing tests run and the passing ones do not is suspicious. Ochiai's
  measure, ef / sqrt(F * (ef + ep)) (ef, ep: failing and passing tests that ran the line, F: all
  failing tests), ranks best among the spectrum measures in the fault-localisation literature;
- the tracebacks: a line a failing test's traceback passes through (the innermost such line of
  the code under test counts most) is raised among lines the spectrum cannot tell apart.

Only files the candidate may change count (`editable`: not the tests, nothing the edit policy
protects). When the spectrum has no failing test (a runner that is not traced, a run cut short),
the frames of the failures' text ("File "x.py", line 12" or "x.py:12:") are used alone.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from ooda.agent.contracts.spectrum import Spectrum, TestTrace

TRACEBACK_WEIGHT = 0.25
"""How much a traceback's passing through a line adds to its spectrum score (at most 1)."""
OUTER_FRAME = 0.5
"""A traceback frame of the code under test that is not the innermost counts this much."""
MAX_SUSPECTS = 40

_FRAME_PATTERNS = (
    re.compile(r'File "(?P<path>[^"]+\.py)", line (?P<line>\d+)'),
    re.compile(r"^(?P<path>[^\s:]+\.py):(?P<line>\d+):", re.MULTILINE),
)


@dataclass(frozen=True)
class Suspect:
    """A line of the code under test and how strongly the failing tests point at it."""

    path: str
    line: int
    score: float
    failing: int = 0
    """Failing tests that ran it."""
    passing: int = 0
    """Passing tests that ran it."""


def localise(
    spectrum: Spectrum,
    editable: Callable[[str], bool],
    *,
    passing_ids: Collection[str] = (),
    failure_text: str = "",
    limit: int = MAX_SUSPECTS,
) -> list[Suspect]:
    """The `limit` most suspicious lines, best first. `passing_ids`: tests known to pass on the
    unpatched code (one the tracer stopped for its time is then not counted failing);
    `failure_text`: the failing tests' output, read for frames when the spectrum has none."""
    failing = [t for t in spectrum.traces if _fails(t, passing_ids)]
    passing = [t for t in spectrum.traces if t.outcome == "passed"]
    if not failing:
        return _from_frames(frames_in(failure_text), editable, limit)
    ef: Counter[tuple[str, int]] = Counter()
    ep: Counter[tuple[str, int]] = Counter()
    for traces, counter in ((failing, ef), (passing, ep)):
        for trace in traces:
            counter.update((path, line) for path, lines in trace.lines.items()
                           if editable(path) for line in lines)
    traced: Counter[tuple[str, int]] = Counter()
    for trace in failing:
        traced.update(_frame_weights(trace.frames, editable))
    total = len(failing)
    suspects = []
    for key in set(ef) | set(traced):
        ochiai = ef[key] / math.sqrt(total * (ef[key] + ep[key])) if ef[key] else 0.0
        score = ochiai + TRACEBACK_WEIGHT * min(1.0, traced[key] / total)
        suspects.append(Suspect(key[0], key[1], round(score, 6), ef[key], ep[key]))
    suspects.sort(key=lambda s: (-s.score, -s.failing, s.passing, s.path, s.line))
    return suspects[:limit]


def frames_in(text: str) -> list[tuple[str, int]]:
    """The (path, line) frames a failure's text names, in order."""
    found: list[tuple[int, str, int]] = []
    for pattern in _FRAME_PATTERNS:
        found += [(m.start(), m["path"], int(m["line"])) for m in pattern.finditer(text)]
    return [(path.removeprefix("./"), line) for _, path, line in sorted(found)]


def _fails(trace: TestTrace, passing_ids: Collection[str]) -> bool:
    if trace.outcome in ("failed", "error"):
        return True
    return trace.outcome == "timeout" and not any(
        trace.test_id == known or trace.test_id.startswith((known + "::", known + "["))
        for known in passing_ids)


def _frame_weights(frames: Iterable[tuple[str, int]],
                   editable: Callable[[str], bool]) -> dict[tuple[str, int], float]:
    """Each editable frame's weight in one traceback: 1 for the innermost, OUTER_FRAME else."""
    own = [frame for frame in frames if editable(frame[0])]
    weights = {frame: OUTER_FRAME for frame in own}
    if own:
        weights[own[-1]] = 1.0
    return weights


def _from_frames(frames: list[tuple[str, int]], editable: Callable[[str], bool],
                 limit: int) -> list[Suspect]:
    """Suspects from the failures' frames alone: the innermost first."""
    own = [frame for frame in frames if editable(frame[0])]
    counts = Counter(own)
    last_seen = {frame: index for index, frame in enumerate(own)}
    ranked = sorted(counts, key=lambda frame: (-counts[frame], -last_seen[frame]))
    total = max(counts.values(), default=1)
    return [Suspect(path, line, round(counts[(path, line)] / total, 6))
            for path, line in ranked[:limit]]
