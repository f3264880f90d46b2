"""Which candidate a blind run submits, chosen without the tests that judge it.

A blind run (docs/SWEBENCH.md) sees only its own checks: the repository's regression tests,
the model's reproduction tests, syntax, ruff, security and mypy. Among its candidates it
prefers, in this order: one that keeps the regression tests passing, one that passes more
reproduction tests (the required ones first: they failed on the base with an assertion), one
that passed every check, then the most common patch up to formatting (a majority vote over
every sample that produced it, as Agentless votes), then the smaller diff, then the earlier.
The winner comes with the sentence that says why, and each reproduction test with how many
candidates passed it: one that no candidate passed (`weak`) told none apart, and only ranks
candidates as a constant does; the loop still feeds its failures back while rounds remain.
Pure functions of the attempts.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from ooda.agent.core.records import Attempt

JUDGED = ("passed", "failed", "timeout", "error")
"""Statuses of attempts whose patch the visible checks judged (invalid edits have no patch)."""


@dataclass(frozen=True)
class Standing:
    """What the visible checks said of one candidate."""

    regression_ok: bool
    """Its tests stage passed, or no regression test applied to it."""
    required: int
    """Required reproduction tests it passed."""
    optional: int
    """Optional reproduction tests it passed."""
    passed: bool
    """It passed every check."""
    votes: int
    """Samples (this one included) that produced its code up to formatting."""
    size: int
    """Lines its patch adds or removes."""

    def key(self) -> tuple[bool, int, int, bool, int, int]:
        return (self.regression_ok, self.required, self.optional, self.passed, self.votes,
                -self.size)


def standing(attempt: Attempt, votes: Counter[str]) -> Standing:
    """`attempt`'s standing, `votes` counting samples by code key (see `vote_counts`)."""
    results = attempt.verdict.results if attempt.verdict else []
    by_name = {r.name: r for r in results}
    tests = by_name.get("pytest")
    repro = by_name.get("repro")
    outcomes = repro.details.get("outcomes") if repro else None
    listed = repro.details.get("required") if repro else None
    passed_tests = ({str(n) for n, o in outcomes.items() if o == "passed"}
                    if isinstance(outcomes, dict) else set())
    required = {str(n) for n in listed} if isinstance(listed, list) else set()
    return Standing(
        regression_ok=tests is not None and tests.status in ("passed", "skipped"),
        required=len(passed_tests & required),
        optional=len(passed_tests - required),
        passed=attempt.status == "passed",
        votes=votes[attempt.code_key or ""],
        size=_size(attempt.patch),
    )


def vote_counts(attempts: list[Attempt]) -> Counter[str]:
    """Samples per code key, over every attempt whose patch was judged (duplicates too: each
    is a sample that arrived at the same code)."""
    return Counter(a.code_key for a in attempts if a.code_key and a.status in JUDGED)


def choose(candidates: list[Attempt], everyone: list[Attempt]) -> tuple[Attempt | None, dict[str, Any]]:
    """The candidate to submit among `candidates` (votes counted over `everyone`), and the
    record of why: {"winner", "why", "standings"}. None when no candidate has a judged patch."""
    votes = vote_counts(everyone)
    judged = [a for a in candidates if a.status in JUDGED and a.patch and a.duplicate_of is None]
    if not judged:
        return None, {"winner": None, "why": "no candidate produced a patch the checks judged"}
    ranked = sorted(judged, key=lambda a: (standing(a, votes).key(), -(a.t_verified or 0.0)),
                    reverse=True)
    best = ranked[0]
    record = {
        "winner": best.attempt_id,
        "why": _why(best, ranked[1:], votes),
        "standings": [_row(a, standing(a, votes)) for a in ranked[:8]],
        "tests": test_tallies(everyone),
    }
    return best, record


def test_tallies(attempts: list[Attempt]) -> dict[str, dict[str, Any]]:
    """Per reproduction test: how many distinct candidates it ran on and how many passed it;
    `weak` when it ran on two or more and none passed (a wrong expectation, or a fix no
    sample found: either way it told no candidate apart)."""
    ran: dict[str, int] = {}
    passed: dict[str, int] = {}
    for attempt in attempts:
        if attempt.duplicate_of is not None or attempt.verdict is None:
            continue
        repro = next((r for r in attempt.verdict.results if r.name == "repro"), None)
        outcomes = repro.details.get("outcomes") if repro else None
        if not isinstance(outcomes, dict):
            continue
        for name, outcome in outcomes.items():
            ran[str(name)] = ran.get(str(name), 0) + 1
            passed[str(name)] = passed.get(str(name), 0) + (outcome == "passed")
    return {name: {"ran_on": n, "passed_by": passed[name], "weak": n >= 2 and not passed[name]}
            for name, n in sorted(ran.items())}


def _why(best: Attempt, others: list[Attempt], votes: Counter[str]) -> str:
    mine = standing(best, votes)
    said = ["it passed every check" if mine.passed else "no candidate passed every check"]
    said.append("it keeps the regression tests passing" if mine.regression_ok
                else "it breaks regression tests (as every candidate does)")
    repro = mine.required + mine.optional
    if repro:
        said.append(f"it passes {repro} reproduction test(s)")
    rivals = [o for o in others if standing(o, votes).key()[:4] == mine.key()[:4]]
    if rivals:
        said.append(f"{len(rivals)} other(s) stood as well; its code was produced by "
                    f"{mine.votes} sample(s)" + (", the most" if mine.votes > max(
                        standing(o, votes).votes for o in rivals) else
                        ", tied; then the smaller or earlier patch"))
    return f"{best.attempt_id}: " + "; ".join(said)


def _row(attempt: Attempt, mine: Standing) -> dict[str, Any]:
    return {"attempt_id": attempt.attempt_id, "regression_ok": mine.regression_ok,
            "repro_required": mine.required, "repro_optional": mine.optional,
            "passed": mine.passed, "votes": mine.votes, "size": mine.size}


def _size(patch: str) -> int:
    return sum(1 for line in patch.splitlines()
               if line[:1] in "+-" and not line.startswith(("+++", "---")))
