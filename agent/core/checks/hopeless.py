"""Stream check: stop an answer whose completed edits can no longer apply (a SEARCH that
matches nothing, a path that does not exist)."""

from __future__ import annotations

import re

from ooda.agent import edits
from ooda.agent.core.checks.base import Stop, StreamContext

_REPLACE_LINE = re.compile(r"^[ \t]*>{5,9} ?REPLACE\b.*\n", re.MULTILINE)
"""A completed end-of-block line (the forms agent/edits/__init__.py accepts)."""


class HopelessEdit:
    """Re-parses the answer only when another `>>>>>>> REPLACE` line is complete (its newline
    has arrived: edits.partial_answer_is_hopeless ignores an unfinished last line), scanning
    only the newly completed lines for it."""

    def __init__(self, context: StreamContext) -> None:
        self.context = context
        self.scanned = 0

    def observe(self, text: str) -> Stop | None:
        end = text.rfind("\n") + 1
        if end <= self.scanned:
            return None
        completed = _REPLACE_LINE.search(text, self.scanned, end) is not None
        self.scanned = end
        if not completed:
            return None
        problem = edits.partial_answer_is_hopeless(text, self.context.read, self.context.views)
        return Stop(f"stopped while streaming: {problem}", "hopeless_edit") if problem else None


def start(context: StreamContext) -> HopelessEdit:
    return HopelessEdit(context)
