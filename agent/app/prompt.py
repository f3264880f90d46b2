"""What the first request of a run would send, without sending it (`ooda prompt`): the
messages, their estimated tokens, and which lines of which files the context shows."""

from __future__ import annotations

from typing import Any

from ooda.agent.context.tokens import estimate
from ooda.agent.core.prompts import context_for, first_prompt
from ooda.tasks.loader import Task


def prompt_report(task: Task, context_tokens: int) -> dict[str, Any]:
    """{"messages": [...], "tokens": N, "context": [{"path", "lines": [[start, end]...]}]}
    for the first prompt of `task`, at most `context_tokens` tokens in all."""
    context = context_for(task, context_tokens)
    messages = first_prompt(task, context)
    return {
        "messages": messages,
        "tokens": sum(estimate(m["content"]) for m in messages),
        "context": [{"path": f.path, "lines": [list(r) for r in f.ranges]}
                    for f in context.files],
    }
