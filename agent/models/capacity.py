"""How many requests one endpoint gets at once, adapted to what it shows it can take.

A local server often generates one answer at a time. llama-cpp-python, by default
(`--interrupt_requests True`), ends a running stream with `[DONE]` and no finish_reason as soon
as another request waits; others queue requests, which then wait for their first token. A stream
that ends without a finish_reason while other requests of ours are in flight is therefore a
capacity signal, not a fault: the limit is halved (at least 1), the stream is sent again once a
slot is free, and no retry is spent on it. Finished streams raise the limit again by one, after
as many finished streams as the limit (more after every cut: each time the endpoint cut a stream
at a level, probing that level again waits twice as long), never above the configured ceiling.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

FIRST_PROBE_AFTER = 2
"""Doubled at each cut: finished streams (begun after the cut) before the limit is raised
again by one (4 after the first cut, 8 after the second, …)."""
MAX_PROBE_AFTER = 256


@dataclass
class Slot:
    """One request's place: whether another request ran beside it at any time."""

    started: int
    """The limiter's count of requests started when this one started."""
    overlapped: bool


class AdaptiveLimit:
    """A semaphore whose size follows the endpoint's capacity (AIMD, floor 1)."""

    def __init__(self, ceiling: int) -> None:
        self.ceiling = ceiling
        self.limit = ceiling
        self.lowest = ceiling
        """The smallest limit reached (run.json reports it)."""
        self.cuts = 0
        """Streams the endpoint cut short while others were in flight."""
        self.in_flight = 0
        self._started = 0
        self._finished_since_change = 0
        self._started_at_cut = 0
        self._probe_after = FIRST_PROBE_AFTER
        self._cond = threading.Condition()

    def acquire(self, timeout_s: float) -> Slot | None:
        """A slot, once fewer than `limit` requests are in flight; None after `timeout_s`."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self.in_flight >= self.limit:
                left = end - time.monotonic()
                if left <= 0 or not self._cond.wait(left):
                    if self.in_flight >= self.limit:
                        return None
            self.in_flight += 1
            self._started += 1
            return Slot(self._started, overlapped=self.in_flight > 1)

    def overlapped(self, slot: Slot) -> bool:
        """Whether another request was in flight at some time during `slot`'s request."""
        with self._cond:
            return slot.overlapped or self.in_flight > 1 or self._started != slot.started

    def release(self, slot: Slot, *, finished: bool = False, cut: bool = False) -> bool:
        """Give the slot back. `finished`: the stream ended with a finish_reason; `cut`: it
        ended without one. True when the cut was a capacity signal (the limit was lowered or
        already at its floor while others ran): the request may be sent again without counting
        as a retry."""
        with self._cond:
            signal = cut and (slot.overlapped or self.in_flight > 1
                              or self._started != slot.started)
            if signal:
                self.cuts += 1
                lowered = max(1, min(self.limit, self.in_flight) // 2)
                if lowered < self.limit:
                    self.limit = lowered
                    self.lowest = min(self.lowest, lowered)
                self._finished_since_change = 0
                self._started_at_cut = self._started
                self._probe_after = min(MAX_PROBE_AFTER, self._probe_after * 2)
            elif finished and slot.started > self._started_at_cut:
                self._finished_since_change += 1
                if (self.limit < self.ceiling
                        and self._finished_since_change >= max(self.limit, self._probe_after)):
                    self.limit += 1
                    self._finished_since_change = 0
            self.in_flight -= 1
            self._cond.notify_all()
            return signal

    def report(self) -> dict[str, int]:
        """What run.json says of it."""
        with self._cond:
            return {"configured": self.ceiling, "lowest": self.lowest, "last": self.limit,
                    "streams_cut": self.cuts}
