"""The mutation source (`--model mutate`): candidates without a model. The failing tests point at
lines (fault localisation from the tests traced on the unpatched code); small edits of those lines
(agent/mutation) are proposed one per candidate, the likeliest first, and the verifier decides
as it decides any model's candidate (the same cascade: guard, tampering, security).

On its first request the source asks the run's verifier for the traced run
(agent/contracts/spectrum.py `TracesBase`; a verifier that cannot trace leaves the failures'
text to localise from), ranks the suspicious lines and makes every single mutant of them, then
pairs of the best ones. Each candidate starts from the task: what a parent changed is undone.
When none is left it says so (`Exhausted`): the run ends, or the schedule's next tier answers.

What it finds is what the tests allow: a mutant that passes by deleting behaviour no test
checks passes. The ranking prefers the smaller change among equals (docs/MUTATE.md).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Completion
from ooda.agent.contracts.spectrum import BaseTrace, Spectrum, TracesBase
from ooda.agent.core.sources.base import Exhausted, Proposal, Request, SourceKind
from ooda.agent.edits import make_patch
from ooda.agent.mutation.localise import Suspect, localise
from ooda.agent.support.testsupport import is_test_support
from ooda.tasks.loader import Task

if TYPE_CHECKING:  # libcst takes ~0.1-0.6 s to import: only a mutate run pays it
    from ooda.agent.mutation.mutants import Mutant

TEST_TIME_FLOOR = 8.0
"""A mutant's tests get at least this many seconds ..."""
TEST_TIME_FACTOR = 4.0
"""... or this many times what the traced run took, less its tests stopped for their time (a
traced run is slower than a plain one; its start-up counts: on a loaded machine pytest alone
takes seconds to start): a mutant that loops is stopped there, not at the plan's timeout."""
FALLBACK_LINES = 400
"""Without a suspicious line (the trace failed, no frame in the failures), the first this many
lines of the smallest editable Python files are mutated, weakly ranked ..."""
FALLBACK_FILES = 20
"""... in a repository of at most this many editable Python files (in a larger one that is
noise: the source has nothing to propose)."""
SAMPLES = 16
"""Candidates per round (the verifier's concurrency bounds how many run at once)."""
ROUNDS = 100_000
"""Rounds at most: the budget, or running out of mutants, ends a mutate run."""


class MutationSource:
    """Proposes the mutants of one task, the likeliest first; thread-safe."""

    name = "mutate"
    learns_from_feedback = False
    """Each candidate starts from the task, no prompt is made, verdicts only (agent/core/loop)."""
    samples = SAMPLES

    def __init__(self, task: Task) -> None:
        self.task = task
        self._lock = threading.Lock()
        self._mutants: Iterator[tuple[int, Mutant]] | None = None
        self.suspects: list[Suspect] = []
        """The suspicious lines, best first (once the first request localised them)."""
        self.singles = 0
        """How many single mutants they gave."""
        self.note = ""
        """What limited the localisation (a traced run cut short, no spectrum), one line."""

    def propose(self, request: Request, deadline: float) -> Proposal:
        with self._lock:
            if self._mutants is None:
                self._mutants = iter(())  # (a localisation that raised is not tried again)
                self._mutants = self._start(request, deadline)
            number, mutant = next(self._mutants, (0, None))
        if mutant is None:
            raise Exhausted(self._tried())
        files = mutant.files(request.read_base)
        if request.parent is not None:  # each mutant starts from the task
            for path in request.parent.files:
                base = request.read_base(path)
                if base is not None:
                    files.setdefault(path, base)
        now = time.monotonic()
        text = self._answer(number, mutant, make_patch(files, request.read_base))
        return Proposal(Completion(text, 0, 0, t_first_token=now, t_done=now),
                        request.messages, files)

    def _start(self, request: Request, deadline: float) -> Iterator[tuple[int, Mutant]]:
        """Localise, then every mutant in order, numbered from 1."""
        from ooda.agent.mutation.mutants import pairs, parsing, single_mutants

        trace = self._trace(request, deadline)
        self.note = trace.spectrum.note
        if isinstance(request.verifier, TracesBase):
            request.verifier.limit_test_time(time_limit(trace.spectrum))
        self.suspects = localise(trace.spectrum, trace.editable, passing_ids=trace.passing,
                                 failure_text=trace.failure_text) or self._fallback(request, trace)
        singles = single_mutants(self.suspects, request.read_base, deadline)
        self.singles = len(singles)
        return enumerate(itertools.chain(parsing(singles, request.read_base),
                                         pairs(singles, request.read_base)), 1)

    def _tried(self) -> str:
        """What was tried, and what limited it: why the source has nothing left."""
        tried = (f"{self.singles} single mutants of {len(self.suspects)} suspicious lines and "
                 "pairs of the best tried") if self.suspects else "no suspicious line"
        return f"{tried}; {self.note}" if self.note else tried

    def _fallback(self, request: Request, trace: BaseTrace) -> list[Suspect]:
        """Lines to mutate when nothing points anywhere: the smallest editable files first."""
        sizes = []
        editable = [path for path in request.list_files() if trace.editable(path)]
        if len(editable) > FALLBACK_FILES:
            self.note = (f"{self.note}; " if self.note else "") + \
                "no line was pointed at, in too large a repository to mutate blindly"
            return []
        for path in editable:
            text = request.read_base(path)
            if text is not None:
                sizes.append((len(text), path, text.count("\n") + 1))
        suspects: list[Suspect] = []
        for _, path, count in sorted(sizes):
            suspects += [Suspect(path, line, 0.1) for line in range(1, count + 1)]
            if len(suspects) >= FALLBACK_LINES:
                break
        self.note = (f"{self.note}; " if self.note else "") + \
            "no line was pointed at: the smallest editable files are mutated, line by line"
        return suspects[:FALLBACK_LINES]

    def _trace(self, request: Request, deadline: float) -> BaseTrace:
        verifier = request.verifier
        if isinstance(verifier, TracesBase):  # (it takes its share of the time left)
            return verifier.trace_base(deadline=deadline)
        protected = tuple(self.task.protected)

        def editable(path: str) -> bool:
            name = path.rsplit("/", 1)[-1]
            return (path.endswith(".py") and not name.startswith("test")
                    and "tests/" not in f"/{path}" and name != "conftest.py"
                    and not is_test_support(path, protected))

        return BaseTrace(Spectrum(complete=False, note="the verifier cannot trace the tests"),
                         editable)

    def _answer(self, number: int, mutant: Mutant, patch: str) -> str:
        """answer.md: which mutant this is, why its line, and its diff."""
        scores = {(s.path, s.line): s for s in self.suspects}
        lines = [f"Mutant {number} ({self.singles} single mutants of {len(self.suspects)} "
                 "suspicious lines, then pairs):"]
        for mutation in mutant.mutations:
            suspect = scores.get((mutation.path, mutation.line))
            why = (f" (suspiciousness {suspect.score:.3f}: run by {suspect.failing} failing and "
                   f"{suspect.passing} passing tests)") if suspect else ""
            lines.append(f"- {mutation.path}:{mutation.line}: {mutation.operator}: "
                         f"{mutation.description}{why}")
        if self.note:
            lines.append(f"Localisation: {self.note}")
        return "\n".join(lines) + f"\n\n```diff\n{patch.rstrip()}\n```\n"


def time_limit(spectrum: Spectrum) -> float:
    """How long a mutant's tests may take: `TEST_TIME_FACTOR` times the traced run's wall time
    (its start-up included) less the tests the tracer stopped, at least `TEST_TIME_FLOOR`."""
    stopped = sum(t.duration_s for t in spectrum.traces if t.outcome == "timeout")
    return max(TEST_TIME_FLOOR, TEST_TIME_FACTOR * max(0.0, spectrum.duration_s - stopped))


def mutate(task: Task) -> MutationSource:
    return MutationSource(task)


def mutate_options(options: LoopOptions) -> LoopOptions:
    """A mutate run: rounds (of `SAMPLES` candidates) until the budget or the mutants run out,
    no context votes (no model to ask)."""
    return replace(options, rounds=max(options.rounds, ROUNDS), context_votes=0)


MUTATE = SourceKind("mutate", mutate, asks_endpoint=False, adjust=mutate_options)
