"""The patch source: one fixed patch, proposed as it is (`--model gold`: the task's reference
fix, to check the harness and the task rather than a model)."""

from __future__ import annotations

import time

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Completion
from ooda.agent.core.sources.base import (
    Proposal,
    Request,
    SourceKind,
    one_candidate,
    read_answer,
)
from ooda.tasks.loader import Task


class PatchSource:
    """Proposes `patch` (a unified diff) for every candidate; asks nothing, costs no token."""

    def __init__(self, patch: str, name: str) -> None:
        self.name = name
        self.answer = f"```diff\n{patch.rstrip()}\n```\n"
        """Its answer.md: the patch as a fenced diff, read like any answer's."""

    def propose(self, request: Request, deadline: float) -> Proposal:
        now = time.monotonic()
        return read_answer(Completion(self.answer, 0, 0, t_first_token=now, t_done=now),
                           request.messages, request)


def gold(task: Task) -> PatchSource:
    """The task's reference patch."""
    if not task.gold_patch:
        raise UsageError(f"--model gold: task {task.id} has no gold_patch")
    return PatchSource(task.gold_patch, "gold")


GOLD = SourceKind("gold", gold, asks_endpoint=False, oracle=True, adjust=one_candidate)
