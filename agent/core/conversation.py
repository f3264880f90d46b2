"""What the model of a run is shown: the code the first prompt shows (chosen once, within the
fast model's window, refined by its votes), what each attempt's conversation showed of the files
(its views), and the messages a round's candidates start from (the first prompt, or the parent's
conversation with what failed and the code the failure names).

Apart from the loop (agent/core/loop.py), which decides which candidates a round has and when the
run ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ooda.agent.context import Context, votes
from ooda.agent.context.widen import widen
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Model
from ooda.agent.core import prompts, selection
from ooda.agent.core.budget import Budget
from ooda.agent.core.records import Attempt
from ooda.agent.edits import FileView, Views
from ooda.agent.support.text import valid_utf8
from ooda.tasks.loader import Task

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Opening:
    """How a candidate's conversation starts."""

    messages: Messages
    revealed: dict[str, set[int]]
    """Lines of files shown in part that its feedback revealed (with its parent's)."""


class Conversation:
    """The prompts of one run. `model`: the fast model (None: its source asks no model)."""

    def __init__(self, task: Task, config: LoopOptions, model: Model | None, budget: Budget,
                 deadline: float) -> None:
        self.task = task
        self.config = config
        self.model = model
        self.budget = budget
        self.deadline = deadline
        self._context: Context | None = None
        self.votes: votes.Votes | None = None
        """What the fast model said about where the change belongs (None: not asked)."""

    @property
    def context(self) -> Context:
        """The code the first prompt shows (chosen once, on first use, as `ooda prompt`
        shows it: agent/core/prompts.first_context), within `context_tokens` and what the
        fast model's window leaves for an answer."""
        if self._context is None:
            self._context = prompts.first_context(
                self.task, self.config.context_tokens, self.model, self.config.context_votes,
                self.deadline, self._heard)
        return self._context

    def _heard(self, found: votes.Votes) -> None:
        """The fast model's votes on the context (their tokens counted like any other)."""
        self.budget.add_tokens(found.prompt_tokens, found.completion_tokens)
        self.votes = found

    def context_tokens(self) -> int:
        """`context_tokens`, lowered to fit the fast model's window when it is known."""
        return prompts.window_budget(self.config.context_tokens, self.model)

    def views_for(self, attempt: Attempt) -> Views:
        """What the model answering `attempt` saw of the files: the first prompt's views,
        and whole the files its parent created."""
        views: dict[str, FileView] = dict(self.context.views())
        for path, lines in attempt.revealed.items():
            if path in views:
                views[path] = views[path].reveal(lines)
        for path in attempt.base_files:
            if path not in views:
                views[path] = FileView(path)
        return views

    def opening(self, parent: Attempt | None, told: str, siblings: list[str]) -> Opening:
        """The conversation a candidate continuing from `parent` starts with: the first
        prompt (`told`: what earlier candidates did), or the parent's with its feedback."""
        if parent is None:
            return Opening(prompts.first_prompt(self.task, self.context, told=told), {})
        feedback, revealed = self._feedback(parent, siblings)
        return Opening(selection.trim_history(
            parent.messages
            + [{"role": "assistant", "content": valid_utf8(parent.answer)}]
            + [{"role": "user", "content": feedback}]
        ), revealed)

    def _feedback(self, parent: Attempt, siblings: list[str]) -> tuple[str, dict[str, set[int]]]:
        """The message a child of `parent` gets: what failed, and the code the failure names
        that the conversation has not shown yet (agent/context/widen.py); the lines it
        reveals, with those revealed before."""
        message = parent.feedback_for_child(siblings)
        revealed = {path: set(lines) for path, lines in parent.revealed.items()}
        failure = parent.verdict.feedback if parent.verdict else parent.feedback
        widening = widen(self.task.repo, self.views_for(parent), failure or "")
        for path, lines in widening.revealed.items():
            revealed.setdefault(path, set()).update(lines)
        if widening.text:
            message = f"{message}\n\n{widening.text}"
        return message, revealed

    def record(self) -> dict[str, Any] | None:
        """What the first prompt showed of the repository, and the fast model's votes
        (run.json `context`; None when no prompt was made)."""
        if self._context is None:
            return None
        return {
            "tokens": self._context.tokens,
            "files": [{"path": f.path, "whole": f.whole} for f in self._context.files],
            "votes": self.votes.record() if self.votes else None,
        }
