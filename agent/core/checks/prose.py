"""Stream check: stop an answer that has talked `max_prose_tokens` without beginning an edit."""

from __future__ import annotations

from ooda.agent import edits
from ooda.agent.core.checks.base import Stop, StreamContext
from ooda.agent.support.text import CHARS_PER_TOKEN, estimate_tokens

PROSE_CHECK_EVERY = 256
"""Characters between two looks at an answer's prose (each look reads the whole answer)."""


class ProseLimit:
    """Looks at the prose once the answer is long enough to hold the limit, every
    PROSE_CHECK_EVERY characters, and only until an edit begins."""

    def __init__(self, max_prose_tokens: int) -> None:
        self.limit = max_prose_tokens
        self.checked = max_prose_tokens * CHARS_PER_TOKEN - PROSE_CHECK_EVERY
        self.editing = False

    def observe(self, text: str) -> Stop | None:
        if self.editing or len(text) < self.checked + PROSE_CHECK_EVERY:
            return None
        self.checked = len(text)
        # all but the last few characters: a fence may be arriving there
        prose = edits.prose_before_edits(text[: len(text) - 8])
        self.editing = prose is None
        if prose is None or estimate_tokens(prose) < self.limit:
            return None
        return Stop(f"stopped while streaming: {estimate_tokens(prose):,} tokens of prose and "
                    "no edit begun; answer with SEARCH/REPLACE blocks", "prose_only")


def start(context: StreamContext) -> ProseLimit | None:
    limit = context.options.max_prose_tokens
    return ProseLimit(limit) if limit > 0 else None
