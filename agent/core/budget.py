"""Wall-clock and token budgets for one task: a hard deadline and a shared token allowance."""

from __future__ import annotations

import threading
import time


class Budget:
    """Tracks the deadline of a run (time.monotonic()) and the tokens spent so far."""

    def __init__(self, time_budget_s: float, token_budget: int | None = None) -> None:
        self.started = time.monotonic()
        self.budget_s = time_budget_s
        self.deadline = self.started + time_budget_s
        self.token_budget = token_budget
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.estimated = False
        self.counted = False
        """The endpoint counted at least one answer's tokens itself."""
        """Some of the counts are estimates (an endpoint that sends no usage)."""
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since the run began."""
        return time.monotonic() - self.started

    def remaining(self) -> float:
        """Seconds left before the deadline (never negative)."""
        return max(0.0, self.deadline - time.monotonic())

    def expired(self) -> bool:
        return time.monotonic() >= self.deadline

    def since_start(self, t: float | None) -> float | None:
        """A monotonic timestamp as seconds since the run began (None stays None)."""
        return None if t is None else round(t - self.started, 3)

    def add_tokens(self, prompt: int, completion: int, *, estimated: bool = False) -> None:
        with self._lock:
            self.prompt_tokens += prompt
            self.completion_tokens += completion
            self.estimated = self.estimated or (estimated and prompt + completion > 0)
            self.counted = self.counted or (not estimated and prompt + completion > 0)

    def tokens_exhausted(self) -> bool:
        if self.token_budget is None:
            return False
        with self._lock:
            return self.prompt_tokens + self.completion_tokens >= self.token_budget
