"""What the loop works on and hands back: its configuration, one Attempt per candidate, the
RunResult, and the JSON record each finished attempt leaves in attempts.jsonl.

Kept apart from the loop's control flow so that the applications (progress display, ci
comments) can read attempts without importing the loop's threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ooda.agent.contracts.defaults import DEFAULTS
from ooda.agent.contracts.protocols import Verdict
from ooda.agent.core import prompts

AttemptStatus = Literal[
    "pending", "passed", "failed", "invalid_edit", "timeout", "cancelled", "error"
]


@dataclass
class LoopConfig:
    """How one task is attacked."""

    samples: int = DEFAULTS.samples
    """Candidates sampled in parallel per round."""
    rounds: int = DEFAULTS.rounds
    """Feedback rounds at most."""
    time_budget_s: float = DEFAULTS.time_budget_s
    """Hard wall-clock deadline for the whole task: generation, verification and clean-up."""
    token_budget: int | None = None
    """Prompt plus completion tokens for the whole run; None for no limit."""
    max_prose_tokens: int = DEFAULTS.max_prose_tokens
    """Stop an answer that streams this many tokens of prose before any edit (0: never)."""
    select: Literal["first", "best", "blind"] = "first"
    """"first": stop at the first passing candidate; "best": finish the round and pick;
    "blind": finish the round and pick as a blind run does (agent/core/blind_select.py), and
    when none passed, submit the best standing candidate all the same."""
    verify_concurrency: int = DEFAULTS.verify_concurrency
    """Candidates verified at once (verification is CPU-bound)."""
    sibling_digest: bool = True
    """Tell each next-round candidate how its parent's siblings failed."""
    context_votes: int = DEFAULTS.context_votes
    """Requests to the fast model for its votes on where the change belongs, when the
    repository is too large to show whole (agent/context/votes.py); 0: none."""
    context_tokens: int = DEFAULTS.context_tokens
    """The most tokens the first prompt may take, the repository's code it shows included
    (agent/context fits the code to what is left)."""


@dataclass
class Attempt:
    """One candidate: its conversation, answer, patch and verdict."""

    attempt_id: str
    round: int
    parent: Attempt | None
    messages: list[dict[str, str]]
    status: AttemptStatus = "pending"
    reason: str = ""
    answer: str = ""
    files: dict[str, str] = field(default_factory=dict)
    patch: str = ""
    patch_sha256: str | None = None
    code_key: str | None = None
    """The resulting code up to formatting (agent/core/normalize.py): candidates are de-duplicated
    by it, so one that differs from another only in layout is not verified again."""
    duplicate_of: str | None = None
    verdict: Verdict | None = None
    feedback: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    """The counts are estimates (~4 characters a token): the endpoint sent none."""
    finish_reason: str | None = None
    """How the endpoint said the answer ended ("stop", "length", …); None when it was cut or
    stopped early."""
    streamed_chars: int = 0
    """Characters of the answer received so far (while it streams; for the live display)."""
    t_start: float | None = None
    t_request: float | None = None
    """When the request that gave the answer was sent (after any wait for a request slot)."""
    t_first_token: float | None = None
    t_generated: float | None = None
    t_verified: float | None = None
    edit_format: str | None = None
    """The edit format the answer was read in (ooda.agent.edits.FORMATS); None when invalid."""
    invalid_kind: str | None = None
    """For an invalid edit: the short name of the reason (EditError.kind)."""
    model: str = ""
    """The name of the model that answered (agent/core/schedule.py picks it per round)."""
    revealed: dict[str, set[int]] = field(default_factory=dict)
    """Lines of files shown in part that this attempt's conversation showed later (feedback
    naming code the first prompt left out, agent/context/widen.py)."""

    @property
    def parent_id(self) -> str | None:
        return self.parent.attempt_id if self.parent else None

    @property
    def base_files(self) -> dict[str, str]:
        """The files this attempt's edits start from: its parent's (an invalid edit was never
        applied, so its child starts again from the original files)."""
        parent = self.parent
        return parent.files if parent and parent.status != "invalid_edit" else {}

    def feedback_for_child(self, siblings: list[str]) -> str:
        """The user message a next-round candidate continuing from this attempt receives."""
        headline = self.reason.splitlines()[0] if self.reason else self.status
        details = self.verdict.feedback if self.verdict else self.feedback
        others = [s for s in siblings if not s.startswith(headline[:160])]
        return prompts.feedback_prompt(
            self.status, headline, "" if details == headline else details, self.patch, others[:3]
        )

    def failed_stage(self) -> str:
        """The last verifier stage that did not pass, else the attempt's status."""
        results = self.verdict.results if self.verdict else []
        failed = [r.name for r in results if r.status != "passed"]
        return failed[-1] if failed else self.status


@dataclass
class RunResult:
    """What a run ended with."""

    status: Literal["passed", "failed", "error"]
    reason: str
    winner: Attempt | None
    attempts: list[Attempt]
    rounds_used: int
    summary: dict[str, Any]
    submitted: Attempt | None = None
    """The candidate a blind run submits: the winner, else the best standing one (None: the
    other selections submit only a winner)."""


ProgressHook = Callable[[Attempt, str], None]


def attempt_record(
    a: Attempt, model_name: str, since: Callable[[float | None], float | None]
) -> dict[str, Any]:
    """The attempts.jsonl line of a finished attempt; `since` turns a monotonic instant into
    seconds since the run started."""
    results = a.verdict.results if a.verdict else []
    return {
        "attempt_id": a.attempt_id,
        "round": a.round,
        "parent_id": a.parent_id,
        "model": a.model or model_name,
        "t_start_s": since(a.t_start),
        "t_request_s": since(a.t_request),
        "t_first_token_s": since(a.t_first_token),
        "t_generated_s": since(a.t_generated),
        "t_verified_s": since(a.t_verified),
        "prompt_tokens": a.prompt_tokens,
        "completion_tokens": a.completion_tokens,
        "tokens_estimated": a.tokens_estimated,
        "finish_reason": a.finish_reason,
        "patch_sha256": a.patch_sha256,
        "duplicate_of": a.duplicate_of,
        "status": a.status,
        "reason": a.reason,
        "edit_format": a.edit_format,
        "invalid_reason": a.invalid_kind,
        "verifiers": [
            {
                "name": r.name,
                "status": r.status,
                "duration_s": round(r.duration_s, 3),
                "summary": r.summary,
            }
            for r in results
        ],
    }
