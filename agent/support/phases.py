"""Where a command's wall-clock seconds go (run.json's and summary.json's `phases`).

The parts of a command record the spans they run, from any thread, on the system's monotonic
clock (the same in every process of the machine: a daemon's worker and the client that handed
it the command agree). Spans overlap (the environment builds while the model client opens,
candidates are verified while others are generated, tasks of an evaluation run side by side),
so `Timeline.split` gives each instant of the command's wall time to one phase running then
(PHASES says which wins) and the instants no span covers to "other": the phases then add up
to the wall time exactly, and "other" says how much of it nothing accounts for.

The command's start is the moment its process started (Linux: /proc/self/stat), or the moment
the client that handed it to a daemon started (`set_command_start`; agent/support/clock.py),
so that the interpreter's start-up and the hand-off are counted too.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from ooda.agent.support.clock import command_start as command_start
from ooda.agent.support.clock import process_age as process_age
from ooda.agent.support.clock import set_command_start as set_command_start

PHASES = (
    "startup",
    "writing",
    "selection",
    "task",
    "generation",
    "verification",
    "environment",
    "base_check",
)
"""The phases, in the order an instant two of them share is given (the later one wins):
- startup: the interpreter's start, imports, the hand-off to a daemon, parsing the command line;
- writing: the run directory's records and patches, closing the sandboxes;
- selection: the loop's own work between candidates (choosing, feedback, bookkeeping);
- task: loading the task and drafting its plan;
- generation: the model client's set-up and candidates being generated;
- verification: candidates being verified (from their last token to their verdict);
- environment: the sandbox backend, the task's environment and the first sandboxes;
- base_check: the unpatched code's tests (the plan's facts about the base).
What the run waits for wins: a candidate generated or verified while the environment builds
or the base check runs is waiting for them (agent/app/basegate.py)."""
OTHER = "other"

class Timeline:
    """The spans of one command (or of one task of an evaluation: `parent` then gets every
    span too)."""

    def __init__(self, start: float | None = None, parent: Timeline | None = None) -> None:
        self.start = command_start() if start is None else start
        self.parent = parent
        self._spans: list[tuple[str, float, float]] = []
        import threading  # (here: the console script's client imports this module for
        # command_start alone, and every command would pay for the import)

        self._lock = threading.Lock()

    def add(self, phase: str, start: float, end: float) -> None:
        """Record that `phase` ran from `start` to `end` (monotonic seconds)."""
        if phase not in PHASES:
            raise ValueError(f"unknown phase {phase!r}")
        if end > start:
            with self._lock:
                self._spans.append((phase, start, end))
            if self.parent is not None:
                self.parent.add(phase, start, end)

    @contextlib.contextmanager
    def span(self, phase: str) -> Iterator[None]:
        """Record the time the block takes as `phase`."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.add(phase, start, time.monotonic())

    def until_now(self, phase: str, since: float | None = None) -> None:
        """Record `phase` from `since` (default: the command's start) until now."""
        self.add(phase, self.start if since is None else since, time.monotonic())

    def split(self, end: float | None = None) -> dict[str, float]:
        """Seconds per phase (every phase named, and "other") from the start to `end`
        (default: now), adding up to that wall time."""
        end = time.monotonic() if end is None else end
        with self._lock:
            spans = [(PHASES.index(p), max(s, self.start), min(e, end)) for p, s, e in self._spans]
        events = sorted(
            [(s, 1, rank) for rank, s, e in spans if e > s]
            + [(e, -1, rank) for rank, s, e in spans if e > s]
        )
        totals = dict.fromkeys((*PHASES, OTHER), 0.0)
        running = [0] * len(PHASES)
        at = self.start
        for when, change, rank in [*events, (end, 0, 0)]:
            if when > at:
                busy = [r for r, count in enumerate(running) if count > 0]
                totals[PHASES[busy[-1]] if busy else OTHER] += when - at
                at = when
            running[rank] += change
        return {name: round(seconds, 4) for name, seconds in totals.items()}
