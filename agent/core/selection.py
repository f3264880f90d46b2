"""Choices between candidates: which failed attempts the next round continues from, what their
siblings' failures were, which of several passing attempts wins, and how much of a
conversation a child keeps.

Pure functions of the attempts, so each rule can be read (and tested) on its own.
"""

from __future__ import annotations

from collections import Counter

from ooda.agent.contracts.stages import CASCADE_ORDER
from ooda.agent.core.records import Attempt

STAGE_RANK: dict[str, int] = {stage: n for n, stage in enumerate(CASCADE_ORDER, start=1)}
"""How far a failed attempt got (a later verifier stage ranks higher; an attempt that no stage
judged ranks 0): later stages make better parents for the next round."""


def pick_parents(batch: list[Attempt]) -> list[Attempt | None]:
    """Failed attempts of this round, those that got furthest first, duplicates last;
    [None] (start afresh) when none failed."""
    failed = [a for a in batch if a.status in ("failed", "invalid_edit", "timeout")]
    if not failed:
        return [None]
    failed.sort(key=lambda a: (a.duplicate_of is not None, -STAGE_RANK.get(a.failed_stage(), 0)))
    return list(failed)


def closest(attempts: list[Attempt]) -> Attempt | None:
    """The failed candidate that came nearest to passing (what a run that found nothing
    reports): one that failed before one that ran out of time, the furthest stage reached, then
    the most tests passed and the fewest failed (of what its test run reported), then the
    smaller patch; None when no candidate was judged."""
    judged = [a for a in attempts if a.status in ("failed", "timeout") and a.patch
              and a.verdict is not None and a.duplicate_of is None]
    if not judged:
        return None

    def counts(a: Attempt) -> tuple[int, int]:
        outcomes: dict[str, str] = {}
        for result in a.verdict.results if a.verdict else []:
            found = result.details.get("outcomes")
            if isinstance(found, dict):
                outcomes.update({str(k): str(v) for k, v in found.items()})
        passed = sum(v == "passed" for v in outcomes.values())
        return -passed, len(outcomes) - passed

    return min(judged, key=lambda a: (a.status != "failed", -STAGE_RANK.get(a.failed_stage(), 0),
                                      *counts(a), len(a.patch)))


def sibling_digest(parents: list[Attempt | None]) -> list[str]:
    """The most common first lines of the parents' failures, with their counts."""
    reasons = Counter(p.reason.splitlines()[0][:160] for p in parents if p is not None)
    return [f"{reason} (x{n})" if n > 1 else reason for reason, n in reasons.most_common(4)]


def pick_best(passing: list[Attempt], everyone: list[Attempt]) -> Attempt:
    """Smallest diff; ties go to the patch that most candidates produced, then the earliest."""
    votes = Counter(a.patch_sha256 for a in everyone if a.patch_sha256)

    def size(a: Attempt) -> int:
        return sum(
            1
            for line in a.patch.splitlines()
            if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
        )

    return min(passing, key=lambda a: (size(a), -votes[a.patch_sha256 or ""], a.t_verified or 0.0))


def trim_history(messages: list[dict[str, str]], keep_exchanges: int = 2) -> list[dict[str, str]]:
    """Keep the system prompt, the task prompt and the last few answer/feedback exchanges."""
    head, rest = messages[:2], messages[2:]
    return head + rest[-2 * keep_exchanges :]
