"""Choices between candidates: which failed attempts the next round continues from, what their
siblings' failures were, which of several passing attempts wins, and how much of a
conversation a child keeps.

Pure functions of the attempts, so each rule can be read (and tested) on its own.
"""

from __future__ import annotations

from collections import Counter

from ooda.agent.contracts.protocols import CASCADE_ORDER
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
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        )

    return min(passing, key=lambda a: (size(a), -votes[a.patch_sha256 or ""], a.t_verified or 0.0))


def trim_history(messages: list[dict[str, str]], keep_exchanges: int = 2) -> list[dict[str, str]]:
    """Keep the system prompt, the task prompt and the last few answer/feedback exchanges."""
    head, rest = messages[:2], messages[2:]
    return head + rest[-2 * keep_exchanges :]
