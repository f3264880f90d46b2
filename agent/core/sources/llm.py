"""The LLM source: a model asked in a conversation, its answer watched while it streams (the
stream checks, agent/core/checks/) and read as edits (agent/edits).

A stream check may ask for the candidate to be corrected at once (a `Stop` with `resume`, the
security watchdog): the halted answer up to its finding stays the assistant's turn, the finding
is the next user turn, and the model answers again within this same proposal, at most
MAX_CORRECTIONS times; the proposal records each halt (`Proposal.halts`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ooda.agent.contracts.errors import ContextOverflow
from ooda.agent.contracts.protocols import Completion, Model
from ooda.agent.core import checks as stream_checks
from ooda.agent.core import selection
from ooda.agent.core.checks import CheckFactory, Stop, Watch
from ooda.agent.core.sources.base import (
    Halt,
    Messages,
    Proposal,
    Request,
    SourceKind,
    read_answer,
)

MAX_CORRECTIONS = 2
"""Halted answers corrected at once per candidate; a third halt ends it as an invalid edit
(its finding then goes to the next round)."""


class LLMSource:
    """Asks `model` for each candidate; `checks`: the stream checks its answers meet (None:
    every registered one, agent/core/checks/)."""

    def __init__(self, model: Model, checks: Sequence[CheckFactory] | None = None) -> None:
        self.model = model
        self.name = model.name
        self.checks = checks

    def propose(self, request: Request, deadline: float) -> Proposal:
        checks = stream_checks.CHECKS if self.checks is None else self.checks
        messages = request.messages
        halted: list[tuple[Stop, Completion]] = []
        while True:
            watch = Watch(request.stream_context(), request.stop, request.live, checks)
            completion, messages = self._complete(messages, request, deadline, watch)
            stop = watch.stopped
            if (not completion.stopped_early or stop is None or stop.resume is None
                    or len(halted) >= MAX_CORRECTIONS or request.stop.is_set()):
                break
            halted.append((stop, completion))
            messages = [*messages, {"role": "assistant", "content": stop.resume},
                        {"role": "user", "content": stop.told}]
        completion = _with_halted(completion, [c for _, c in halted])
        halts = tuple(Halt(stop.by, len(c.text), max(0, len(completion.text) - len(c.text)),
                           c.text, stop.told) for stop, c in halted)
        if completion.stopped_early:
            proposal = Proposal(completion, messages, invalid=watch.stopped)
        else:
            proposal = read_answer(completion, messages, request)
        return replace(proposal, halts=halts)

    def _complete(self, messages: Messages, request: Request, deadline: float,
                  watch: Watch) -> tuple[Completion, Messages]:
        """One answer to `messages`; a feedback conversation too long for the model's window
        is shortened to its last exchange and sent once more."""
        try:
            return self.model.complete(messages, deadline=deadline, on_text=watch), messages
        except ContextOverflow:
            shorter = selection.trim_history(messages, keep_exchanges=1)
            if request.parent is None or len(shorter) == len(messages):
                raise
            return self.model.complete(shorter, deadline=deadline, on_text=watch), shorter


def _with_halted(completion: Completion, halted: list[Completion]) -> Completion:
    """The final answer, with the tokens (and first token and request times) of the halted
    answers before it counted in."""
    if not halted:
        return completion
    first = halted[0]
    return replace(
        completion,
        prompt_tokens=completion.prompt_tokens + sum(c.prompt_tokens for c in halted),
        completion_tokens=completion.completion_tokens
        + sum(c.completion_tokens for c in halted),
        tokens_estimated=completion.tokens_estimated or any(c.tokens_estimated for c in halted),
        t_first_token=first.t_first_token, t_request=first.t_request,
    )


LLM = SourceKind("llm")
"""Every `--model` name that is not another source's: a model on an OpenAI-compatible
endpoint (agent/models opens it)."""
