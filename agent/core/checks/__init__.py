"""The checks an answer meets while it streams, in order: `CHECKS`, one line per check.

A check is one module of this package with a `start(context) -> StreamCheck | None` function
(agent/core/checks/base.py says what a check is); adding one is adding its file and its line
below. `Watch` runs them as the model client's `on_text` hook.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from ooda.agent.core.checks import hopeless, prose, security
from ooda.agent.core.checks.base import CheckFactory, Stop, StreamCheck, StreamContext

__all__ = ["CHECKS", "CheckFactory", "Stop", "StreamCheck", "StreamContext", "Watch"]

CHECKS: tuple[CheckFactory, ...] = (
    prose.start,  # too much prose and no edit begun
    hopeless.start,  # a completed edit that cannot apply
    security.start,  # a security finding in what the answer adds: corrected at once
)
"""Every stream check, in the order they look at each chunk."""


class Watch:
    """The on_text hook of one answer: publishes the text so far (`live`), ends the stream once
    `stop` is set (the run is over) or a check says `Stop`, and keeps that stop (`stopped`) for
    the source to hand back. It runs on the thread that streams the answer."""

    def __init__(self, context: StreamContext, stop: threading.Event,
                 live: Callable[[str], None] = lambda text: None,
                 checks: Sequence[CheckFactory] = CHECKS) -> None:
        self.stop = stop
        self.live = live
        self.checks = [c for make in checks if (c := make(context)) is not None]
        self.stopped: Stop | None = None

    def __call__(self, text: str) -> bool:
        self.live(text)
        if self.stop.is_set():
            return False
        for check in self.checks:
            found = check.observe(text)
            if found is not None:
                self.stopped = found
                return False
        return True
