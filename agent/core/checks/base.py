"""What a stream check is: a value that reads an answer as it streams and may say `Stop`.

A check is made for one answer (`StreamContext` says what that answer's candidate sees) and is
then shown the text so far, once per arriving chunk, on the model client's thread. It returns
None to let the stream go on, or a `Stop` saying why it must end: the source that asked
(agent/core/sources/llm.py) ends the stream and hands the stop back in its `Proposal`, and the
loop records the reason and feeds it back to the model. A check keeps its own state (how far it
has read); it changes nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ooda.agent.contracts.options import LoopOptions
from ooda.agent.edits import Views
from ooda.agent.edits.base import ReadFile

if TYPE_CHECKING:
    from ooda.tasks.loader import Task


@dataclass(frozen=True)
class Stop:
    """Why a candidate's answer gives no patch to verify: a stream check stopped it, or its
    edits could not be read."""

    reason: str
    """One line for the attempt's record (attempts.jsonl `reason`)."""
    kind: str
    """Its short name (attempts.jsonl `invalid_reason`): "hopeless_edit", "prose_only", …"""
    feedback: str = ""
    """What the model is told in the candidate's next turn; empty: `reason`."""
    resume: str | None = None
    """Set: correct the candidate at once instead of ending it. The answer's text up to here
    (this value) stays the assistant's turn, `told` is the next user turn, and the same
    candidate answers again in the same round (agent/core/sources/llm.py)."""
    by: str = ""
    """What stopped it, for the records (`halted_by`): the check's rule (e.g. `S608
    sql-format`)."""

    @property
    def told(self) -> str:
        return self.feedback or self.reason


@dataclass(frozen=True)
class StreamContext:
    """What a check may read about the answer it watches."""

    task: Task
    """The task as the loop sees it (its `verifiers` table: the stages' options)."""
    read: ReadFile
    """A file as the candidate sees it (the task's repository with its parent's edits)."""
    read_base: ReadFile
    """A file of the unpatched repository (what a baseline-relative check compares with)."""
    views: Views
    """What the model was shown of the files shown in part (agent/edits/views.py)."""
    options: LoopOptions
    """The run's loop options (a check's limits, such as `max_prose_tokens`)."""


class StreamCheck(Protocol):
    """One check on one streaming answer."""

    def observe(self, text: str) -> Stop | None:
        """The answer so far (it only grows): None to go on, else why the stream must end.
        Called once per arriving chunk: it must stay cheap (look at the new part only)."""
        ...


CheckFactory = Callable[[StreamContext], StreamCheck | None]
"""Makes a check for one answer; None when it has nothing to check (e.g. its limit is off)."""
