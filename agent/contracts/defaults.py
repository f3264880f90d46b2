"""The defaults of a run, written once: the CLI's options, RunOptions, LoopConfig and the model
configuration all read them from here, so `ooda run -h` and the code can never disagree."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Defaults:
    """What a run does when nobody says otherwise."""

    samples: int = 4
    """Candidates sampled in parallel per round."""
    rounds: int = 3
    """Feedback rounds at most."""
    time_budget_s: float = 600.0
    """Wall-clock budget for one task."""
    temperature: float = 0.8
    """Sampling temperature."""
    concurrency: int = 8
    """Model requests in flight at once (ooda run)."""
    verify_concurrency: int = 2
    """Candidates verified at once."""
    escalate_below: float = 0.25
    """With a model to escalate to: escalate once less than this fraction of the budget is
    left (agent/core/schedule.py)."""


DEFAULTS = Defaults()
