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
    max_tokens: int = 4096
    """Completion tokens one answer may take (lowered to what the context window leaves)."""
    max_prose_tokens: int = 2048
    """An answer that streams this many tokens of prose with no edit begun is stopped (0: never;
    a leading <think> block is not counted)."""
    verify_concurrency: int = 2
    """Candidates verified at once."""
    context_votes: int = 3
    """Requests to the fast model voting where the change belongs (large repositories)."""
    context_tokens: int = 32_000
    """Tokens of repository code the first prompt may show (agent/context): a quarter of a
    128k-token window, leaving room for the rounds of feedback that follow it."""
    repro_tests: int = 4
    """Reproduction tests a blind run asks the model for, in parallel (agent/app/protocol.py)."""
    escalate_below: float = 0.25
    """With a model to escalate to: escalate once less than this fraction of the budget is
    left (agent/core/schedule.py)."""


DEFAULTS = Defaults()
