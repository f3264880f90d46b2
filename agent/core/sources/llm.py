"""The LLM source: a model asked in a conversation, its answer watched while it streams (the
stream checks, agent/core/checks/) and read as edits (agent/edits)."""

from __future__ import annotations

from collections.abc import Sequence

from ooda.agent.contracts.errors import ContextOverflow
from ooda.agent.contracts.protocols import Model
from ooda.agent.core import checks as stream_checks
from ooda.agent.core import selection
from ooda.agent.core.checks import CheckFactory, Watch
from ooda.agent.core.sources.base import Proposal, Request, SourceKind, read_answer


class LLMSource:
    """Asks `model` for each candidate; `checks`: the stream checks its answers meet (None:
    every registered one, agent/core/checks/)."""

    def __init__(self, model: Model, checks: Sequence[CheckFactory] | None = None) -> None:
        self.model = model
        self.name = model.name
        self.checks = checks

    def propose(self, request: Request, deadline: float) -> Proposal:
        """A feedback conversation too long for the model's window is shortened to its last
        exchange and sent once more."""
        checks = stream_checks.CHECKS if self.checks is None else self.checks
        watch = Watch(request.stream_context(), request.stop, request.live, checks)
        messages = request.messages
        try:
            completion = self.model.complete(messages, deadline=deadline, on_text=watch)
        except ContextOverflow:
            shorter = selection.trim_history(messages, keep_exchanges=1)
            if request.parent is None or len(shorter) == len(messages):
                raise
            messages = shorter
            completion = self.model.complete(shorter, deadline=deadline, on_text=watch)
        if completion.stopped_early:
            return Proposal(completion, messages, invalid=watch.stopped)
        return read_answer(completion, messages, request)


LLM = SourceKind("llm")
"""Every `--model` name that is not another source's: a model on an OpenAI-compatible
endpoint (agent/models opens it)."""
