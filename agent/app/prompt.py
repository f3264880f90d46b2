"""What the first request of a run would send, without sending it (`ooda prompt`): the
messages, their estimated tokens, and which lines of which files the context shows.

The context is chosen as a run chooses it (agent/core/prompts.first_context): with a model
named, within what its window leaves and with its votes on a repository too large to show
whole, asked exactly as the run asks them (a sampling model may answer otherwise on another
call, as it may from one run to the next); without one, the model-free choice."""

from __future__ import annotations

import time
from typing import Any

from ooda.agent.context.tokens import estimate
from ooda.agent.contracts.options import LoopOptions, ModelOptions
from ooda.agent.contracts.protocols import Model
from ooda.agent.core.prompts import first_context, first_prompt
from ooda.agent.models import open_model
from ooda.tasks.loader import Task

VOTE_DEADLINE_S = 60.0
"""The longest the model's votes may take here (a run gives them its own deadline)."""


def prompt_report(task: Task, context_tokens: int, model: Model | None = None,
                  samples: int = LoopOptions().context_votes) -> dict[str, Any]:
    """{"messages": [...], "tokens": N, "context": [{"path", "lines": [[start, end]...]}]}
    for the first prompt of `task`, at most `context_tokens` tokens in all; with `model`,
    also "votes" (what its `samples` votes said, or null when it was not asked)."""
    heard: list[Any] = []
    context = first_context(task, context_tokens, model, samples,
                            time.monotonic() + VOTE_DEADLINE_S, heard.append)
    messages = first_prompt(task, context)
    report: dict[str, Any] = {
        "messages": messages,
        "tokens": sum(estimate(m["content"]) for m in messages),
        "context": [{"path": f.path, "lines": [list(r) for r in f.ranges]}
                    for f in context.files],
    }
    if model is not None:
        report["votes"] = heard[0].record() if heard else None
    return report


def prompt_with_model(task: Task, context_tokens: int, options: ModelOptions) -> dict[str, Any]:
    """`prompt_report` with the model `options` name, open for the call ("gold" is never
    asked, as in a run)."""
    if options.name == "gold":
        return prompt_report(task, context_tokens, None) | {"votes": None}
    with open_model(options, task) as model:
        return prompt_report(task, context_tokens, model)
