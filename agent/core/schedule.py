"""Which source answers a round: the fast one first, a stronger one when the fast one keeps
failing ("escalation"), and what each one's tokens cost. A source is a model asked through the
LLM source, or any other candidate source (agent/core/sources/).

A run with one model has a schedule of one tier. With a strong tier, the rule is: after
`after_rounds` rounds of the fast model without a pass (default: all rounds but the last), or
once the budget left (time or tokens, as a fraction) falls under `budget_below`, every later
round's candidates come from the strong model. The strong model starts afresh from the task,
told what the fast model's best failing candidates did and how they failed (`digest`), rather
than continuing their conversations.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ooda.agent.contracts.options import EscalationOptions
from ooda.agent.contracts.protocols import Model
from ooda.agent.core.records import Attempt
from ooda.agent.core.sources import CandidateSource, as_source

DEFAULT_BUDGET_BELOW: float = EscalationOptions().escalate_below
"""Escalate once less than this fraction of the time (or token) budget is left."""
DIGEST_CANDIDATES = 3
"""How many of the fast model's failing candidates the strong model is shown."""
DIGEST_PATCH_CHARS = 3000
DIGEST_FEEDBACK_CHARS = 1500


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


@dataclass(frozen=True)
class Tier:
    """One source of a schedule and its price."""

    source: CandidateSource
    price: Price = field(default_factory=Price)
    role: str = "fast"
    """"fast" or "strong": how reports name it."""


FIRST_SHARE = 1 / 3
"""A first tier (`--model mutate,FAST,STRONG`) answers until it has nothing left or has used
this share of the budget."""


class ModelSchedule:
    """The sources of a run in escalation order: the fast tier, optionally a strong one it
    escalates to, and optionally a first tier before both (a source that needs no model, such
    as mutation: it hands over to the fast tier once it has nothing left or has used
    `FIRST_SHARE` of the budget; the fast tier's rounds then count from the hand-over)."""

    def __init__(
        self,
        fast: Tier,
        strong: Tier | None = None,
        *,
        after_rounds: int | None = None,
        budget_below: float = DEFAULT_BUDGET_BELOW,
        first: Tier | None = None,
        first_share: float = FIRST_SHARE,
    ) -> None:
        self.fast = fast
        self.strong = strong
        self.first = first
        self.first_share = first_share
        self.handed_over_at: int | None = None if first is not None else 1
        """The first round the fast tier answered (1 without a first tier; None while the
        first tier answers)."""
        self.handover_reason: str | None = None
        self.first_exhausted = False
        self.after_rounds = after_rounds
        self.budget_below = budget_below
        self.escalated_at: int | None = None
        """The first round the strong model answered; None while it has not."""
        self.escalation_reason: str | None = None
        self.fast_exhausted = False
        """The fast source said it has no more candidates: the strong tier answers next."""

    @classmethod
    def single(cls, answerer: Model | CandidateSource,
               price: Price | None = None) -> ModelSchedule:
        return cls(Tier(as_source(answerer), price or Price()))

    @property
    def tiers(self) -> list[Tier]:
        first = [self.first] if self.first is not None else []
        return first + ([self.fast] if self.strong is None else [self.fast, self.strong])

    def starts_afresh(self, round_no: int) -> bool:
        """Whether round `round_no` is the first of a tier after another (its candidates start
        from the task, told of the tier before's best failures)."""
        return round_no in (self.escalated_at, self.handed_over_at) and round_no > 1

    def exhausted(self) -> bool:
        """The tier that answered the last round has no more candidates: True when a later
        tier answers the next round, False when none is left."""
        if self.handed_over_at is None:
            self.first_exhausted = True
            return True
        if self.strong is None or self.escalated_at is not None:
            return False
        self.fast_exhausted = True
        return True

    def tier_for(self, round_no: int, rounds: int, budget_left: float) -> Tier:
        """The tier that answers round `round_no` of `rounds`, with `budget_left` (0..1) of
        the budget left; once the strong model has answered, it answers every later round."""
        if self.handed_over_at is None:
            assert self.first is not None
            if not self.first_exhausted and budget_left > 1 - self.first_share:
                return self.first
            self.handed_over_at = round_no
            self.handover_reason = (
                f"{self.first.source.name} has no more candidates" if self.first_exhausted
                else f"{self.first.source.name} used its {self.first_share:.0%} of the budget")
        if self.strong is None:
            return self.fast
        if self.escalated_at is not None:
            return self.strong
        fast_round = round_no - self.handed_over_at + 1
        fast_rounds = self.after_rounds if self.after_rounds is not None else max(rounds - 1, 1)
        if self.fast_exhausted:
            reason = f"{self.fast.source.name} has no more candidates"
        elif fast_round > fast_rounds:
            reason = f"{fast_round - 1} round(s) of {self.fast.source.name} without a pass"
        elif fast_round > 1 and budget_left < self.budget_below:
            reason = f"less than {self.budget_below:.0%} of the budget left"
        else:
            return self.fast
        self.escalated_at, self.escalation_reason = round_no, reason
        return self.strong

    def price_of(self, model_name: str) -> Price:
        for tier in self.tiers:
            if tier.source.name == model_name:
                return tier.price
        return Price()

    def role_of(self, model_name: str) -> str:
        for tier in self.tiers:
            if tier.source.name == model_name:
                return tier.role
        return "fast"


def digest(failed: list[Attempt], limit: int = DIGEST_CANDIDATES) -> str:
    """What the strong model is told of the fast model's best failing candidates (`failed`,
    best first): each one's change and its verdict, bounded."""
    shown = [a for a in failed if a.duplicate_of is None][:limit]
    if not shown:
        return ""
    lines = [
        f"A faster model tried this task first; {len(shown)} of its best failing candidates "
        "follow, each with its change and what failed. Learn from them; do not repeat them."
    ]
    for n, attempt in enumerate(shown, start=1):
        verdict = attempt.verdict.feedback if attempt.verdict else attempt.feedback
        lines += ["", f"## Candidate {n} ({attempt.status}): {attempt.reason.splitlines()[0]}"]
        if attempt.patch.strip():
            lines.append(f"```diff\n{_clip(attempt.patch.strip(), DIGEST_PATCH_CHARS)}\n```")
        if verdict.strip():
            lines += ["What failed:", _clip(verdict.strip(), DIGEST_FEEDBACK_CHARS)]
    return "\n".join(lines)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 6] + " [...]"


def per_model(
    attempts: list[Attempt], schedule: ModelSchedule, winner: Attempt | None,
    other_calls: dict[str, tuple[int, int, int]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Tokens, cost and generation time of each model's attempts (run.json/summary.json);
    `other_calls`: (requests, prompt tokens, completion tokens) per model of the run's other
    requests (a blind run's reproduction tests), counted in its tokens and cost."""
    sums: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"attempts": 0, "prompt_tokens": 0, "completion_tokens": 0, "generation_s": 0.0}
    )
    for tier in schedule.tiers:
        sums[tier.source.name]["role"] = tier.role
    for a in attempts:
        if a.status == "pending" or not a.model:
            continue
        entry = sums[a.model]
        entry["attempts"] += 1
        entry["prompt_tokens"] += a.prompt_tokens
        entry["completion_tokens"] += a.completion_tokens
        if a.t_start is not None and a.t_generated is not None:
            entry["generation_s"] += a.t_generated - a.t_start
    for name, (calls, prompt, completion) in (other_calls or {}).items():
        entry = sums[name]
        entry["other_requests"] = calls
        entry["prompt_tokens"] += prompt
        entry["completion_tokens"] += completion
    for name, entry in sums.items():
        price = schedule.price_of(name)
        entry["cost_usd"] = round(price.cost(entry["prompt_tokens"], entry["completion_tokens"]), 6)
        entry["generation_s"] = round(entry["generation_s"], 3)
        entry["solved"] = winner is not None and winner.model == name
        entry.setdefault("role", schedule.role_of(name))
    return dict(sums)
