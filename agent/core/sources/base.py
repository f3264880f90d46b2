"""What a candidate source is: the thing the loop asks for one candidate change per attempt.

The loop plans each round (which candidates continue from which failed ones, the conversation
each carries), asks the round's source for each candidate (`propose`), and then does what is the
same for every source: keep the answer, turn the changed files into a patch, drop duplicates,
verify, feed failures back. A source is anything that can answer a `Request` with a `Proposal`:
a model asked in a conversation (agent/core/sources/llm.py), a fixed patch (patch.py), a program
that mutates code. `SourceKind` is what the applications need to know of a source by its
`--model` name (agent/core/sources/__init__.py holds them): whether it asks an endpoint, whether
it is an oracle, how to open it for a task.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ooda.agent import edits
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Completion, PatchVerifier
from ooda.agent.core.checks import Stop, StreamContext
from ooda.agent.edits import Views
from ooda.agent.edits.base import ListFiles, ReadFile

if TYPE_CHECKING:
    from ooda.agent.core.records import Attempt
    from ooda.tasks.loader import Task

Messages = list[dict[str, str]]


class Exhausted(Exception):
    """Raised by `propose` when the source has no more candidates: the attempt is cancelled;
    a round in which every candidate met it ends the source's turn (the schedule escalates, or
    the run ends: "no more candidates")."""


@dataclass(frozen=True)
class Request:
    """What a source is asked for one candidate (read it; change none of it)."""

    task: Task
    """The task as the loop sees it (a blind run's: the visible one)."""
    attempt_id: str
    round: int
    parent: Attempt | None
    """The finished candidate this one continues (its files, its verdict), None: from the
    task."""
    messages: Messages
    """The conversation so far: the first prompt, or the parent's with its feedback."""
    read: ReadFile
    """A file as this candidate starts from it: the repository's, with its parent's edits."""
    list_files: ListFiles
    """The files this candidate sees (the repository's and those its parent created)."""
    views: Views
    """What the conversation showed of the files it showed in part."""
    read_base: ReadFile
    """A file of the unpatched repository."""
    verifier: PatchVerifier
    """What will judge the candidate (a source may ask more of it: agent/contracts/spectrum.py's
    `TracesBase`, the traced run of the tests on the unpatched code)."""
    options: LoopOptions
    """The run's loop options."""
    stop: threading.Event = field(default_factory=threading.Event)
    """Set when the run is over (another candidate passed, the budget ran out): end early."""
    live: Callable[[str], None] = lambda text: None
    """Give it the answer so far while it streams (the live display; Ctrl-C keeps it)."""

    def stream_context(self) -> StreamContext:
        return StreamContext(self.task, self.read, self.read_base, self.views, self.options)


@dataclass(frozen=True)
class Halt:
    """An answer a stream check halted and that the source had corrected at once, in the same
    candidate (a `Stop` with `resume`: the security watchdog)."""

    by: str
    """The rule that halted it (records' `halted_by`)."""
    streamed: int
    """Characters of the halted answer that had streamed."""
    saved: int = 0
    """Characters it did not stream, estimated as the corrected answer's length (the same
    candidate's whole answer, written again) minus `streamed`."""
    answer: str = ""
    """The halted answer as it had streamed (kept in the run directory, never lost)."""
    told: str = ""
    """What the model was told (the finding: rule, line, why, the safe alternative)."""


@dataclass(frozen=True)
class Proposal:
    """One candidate: its answer, and the files it changes or why it changes none."""

    completion: Completion
    """The answer as text (answer.md), its tokens and timings; `stopped_early`: it was cut
    short (by the run's end, or by `invalid`)."""
    messages: Messages
    """The conversation the answer continues (the request's, shortened if it had to be)."""
    files: dict[str, str] = field(default_factory=dict)
    """Path -> new content of each file it changes, against what the request's `read` gives."""
    edit_format: str | None = None
    """How the changes were written (agent/edits FORMATS' names), None when not read from text."""
    invalid: Stop | None = None
    """Why it gives nothing to verify (a stream check stopped it, its edits could not be read);
    the loop records it and feeds it back."""
    halts: tuple[Halt, ...] = ()
    """The answers halted and corrected at once before this one (the conversation in
    `messages` holds them and their findings)."""


@runtime_checkable
class CandidateSource(Protocol):
    """Proposes candidate changes; called from many threads at once (one per candidate)."""

    name: str
    """How records name what answered (run.json `model`, attempts.jsonl `model`)."""

    def propose(self, request: Request, deadline: float) -> Proposal:
        """One candidate for `request`, before `deadline` (time.monotonic()). Raises what a
        model raises (agent/contracts/errors.py): GenerationError with the part that arrived,
        ContextOverflow, InfraError / UsageError for what every candidate would meet."""
        ...


def read_answer(completion: Completion, messages: Messages, request: Request) -> Proposal:
    """The proposal of an answer written as text: its edits read in the first edit format it
    uses (agent/edits), against the files the request's candidate starts from."""
    try:
        parsed = edits.parse_edits(completion.text, request.read, request.list_files,
                                   request.views)
    except edits.EditError as exc:
        return Proposal(completion, messages, invalid=Stop(str(exc), exc.kind))
    return Proposal(completion, messages, parsed.files, parsed.edit_format)


@dataclass(frozen=True)
class SourceKind:
    """A source as the applications know it, by its `--model` name."""

    name: str
    open: Callable[[Task], CandidateSource] | None = None
    """The source that answers `task`; None: an endpoint's model, opened by the application
    (agent/models) and asked through the LLM source."""
    asks_endpoint: bool = True
    """It asks a model over HTTP (an endpoint to check, an SDK to import, tokens to count)."""
    oracle: bool = False
    """It answers from the task's gold patch (the reference fix): its number is an oracle's,
    a task without one cannot be run with it, and a failure is the harness's or the task's,
    not a candidate's."""
    adjust: Callable[[LoopOptions], LoopOptions] = lambda options: options
    """The loop options a run with it uses, from the user's (`one_candidate`: one sample, one
    round, no votes)."""

    def loop_options(self, options: LoopOptions) -> LoopOptions:
        """The loop options a run with this source uses."""
        return self.adjust(options)


def one_candidate(options: LoopOptions) -> LoopOptions:
    """A source with one answer: one candidate, verified once (one sample, one round, no
    context votes)."""
    return replace(options, samples=1, rounds=1, context_votes=0)
