"""Stream check: stop an answer whose completed edits can no longer apply (a SEARCH that
matches nothing, a path that does not exist)."""

from __future__ import annotations

import re

from ooda.agent import edits
from ooda.agent.core.checks.base import Stop, StreamContext
from ooda.agent.edits import formats


class HopelessEdit:
    """Re-parses the answer only when another line that completes an edit (`>>>>>>> REPLACE`:
    agent/edits/formats.py's `completes`) has arrived whole (its newline too:
    edits.partial_answer_is_hopeless ignores an unfinished last line), scanning only the newly
    completed lines for it."""

    def __init__(self, context: StreamContext, completed: re.Pattern[str]) -> None:
        self.context = context
        self.completed = re.compile(f"^{completed.pattern}.*\n", re.MULTILINE)
        self.scanned = 0

    def observe(self, text: str) -> Stop | None:
        end = text.rfind("\n") + 1
        if end <= self.scanned:
            return None
        completed = self.completed.search(text, self.scanned, end) is not None
        self.scanned = end
        if not completed:
            return None
        problem = edits.partial_answer_is_hopeless(text, self.context.read, self.context.views)
        return Stop(f"stopped while streaming: {problem}", "hopeless_edit") if problem else None


def start(context: StreamContext) -> HopelessEdit | None:
    completed = formats.edit_completed()
    return HopelessEdit(context, completed) if completed is not None else None
