"""What `ooda ci` is told and what it returns (CiOptions, CiOutcome), the failures it works
from (FailedTest, FailureReport) and the size limits of its statement and comment."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MESSAGE_CHARS = 1_200
"""Failure text kept per failing test in the statement."""


STATEMENT_FAILURE_CHARS = 8_000
"""Failure text kept in the statement in all."""


PR_BODY_CHARS = 3_000


COMMENT_TESTS = 15


COMMENT_ATTEMPTS = 12


COMMENT_DIFF_CHARS = 40_000


@dataclass
class CiOptions:
    """What `ooda ci` is told besides the loop's own options (RunOptions)."""

    repo: Path = Path(".")
    junit: list[Path] = field(default_factory=list)
    test_cmd: str | None = None
    out: Path = Path("ooda-ci-out")
    post: str | None = None
    """None, or "github"."""
    pr: int | None = None
    review: bool = False
    push_branch: bool = False
    task_id: str | None = None
    requirements: Path | None = None
    """Third-party packages the repository's tests need in the sandbox (requirements.txt)."""
    base: str | None = None
    """The pull request's base commit (`--base`; default: the event's, or a merge's first
    parent): with --junit, the reported failures that fail there too are set apart."""


@dataclass
class FailedTest:
    """One failing test and what it said."""

    test_id: str
    message: str


@dataclass
class FailureReport:
    """What the failed job says: failing and passing tests, with the failures' text."""

    fail_to_pass: list[str]
    pass_to_pass: list[str]
    failures: list[FailedTest]
    source: str
    """Where it came from, for people: "JUnit report.xml" or "`python -m pytest -q`"."""
    failing_before: list[FailedTest] = field(default_factory=list)
    """Reported failures that fail on the pull request's base too (agent/app/ci/earlier.py):
    not the fix's job, and left failing by it."""
    base_rev: str | None = None
    """The base commit they were run on (short sha)."""
    base_note: str = ""
    """Why the reported failures could not be split (no base commit to run them on)."""


@dataclass
class CiOutcome:
    """What one `ooda ci` run did."""

    status: str
    reason: str
    summary: dict[str, Any]
    out_dir: Path
    comment: str
    suggestions: list[dict[str, Any]]
    patch: str | None = None
    run_dir: Path | None = None
    comment_url: str | None = None
    review_url: str | None = None
    branch: str | None = None
    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        if self.skipped:
            return 0
        return {"passed": 0, "failed": 1}.get(self.status, 3)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.summary,
            "status": self.status,
            "reason": self.reason,
            "out_dir": str(self.out_dir),
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "suggestion": str(self.out_dir / "suggestion.diff") if self.patch else None,
            "comment": str(self.out_dir / "comment.md"),
            "suggestions": len(self.suggestions),
            "comment_url": self.comment_url,
            "review_url": self.review_url,
            "branch": self.branch,
            "skipped": self.skipped,
            "warnings": self.warnings,
        }

