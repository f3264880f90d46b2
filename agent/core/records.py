"""What the loop works on and hands back: one Attempt per candidate, the RunResult, and the
two records a run leaves, as types written in one place: AttemptRecord (one attempts.jsonl
line per finished attempt) and RunSummary (run.json).

Kept apart from the loop's control flow so that the applications (progress display, ci
comments, reports, evaluations) can read attempts and summaries without importing the loop's
threads. Both records read back what they wrote (`from_json`), tolerating keys they do not know
and missing keys (older runs): a reader uses attributes, never string keys. A new record field is
one field here (with its default) and the code that fills it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal

from ooda.agent.contracts.protocols import Dropped, Verdict
from ooda.agent.core import prompts

AttemptStatus = Literal[
    "pending", "passed", "failed", "invalid_edit", "timeout", "cancelled", "error"
]


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
    streamed: str = ""
    """The answer as received so far, while it streams (kept as its answer on Ctrl-C)."""
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
    halted_by: list[str] = field(default_factory=list)
    """The rules that halted this candidate's earlier answers while they streamed, each
    corrected at once in the same candidate (the security watchdog)."""
    chars_saved: int = 0
    """Characters those halted answers did not stream (estimated: the corrected answer's
    length minus what had streamed)."""
    model: str = ""
    """The name of the model that answered (agent/core/schedule.py picks it per round)."""
    dropped: list[Dropped] = field(default_factory=list)
    """Files of its patch left out before judging (tests, configuration: the edit policy's,
    agent/verify/admit.py); `patch` and `files` are then what was judged, without them."""
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


OMIT_EMPTY = "ooda.omit_empty"
"""Field metadata: the key is left out of the JSON when the value is None or empty."""


def _to_json(record: Any) -> dict[str, Any]:
    """A record dataclass as JSON values, in field order (nested records too)."""
    out: dict[str, Any] = {}
    for f in fields(record):
        value = getattr(record, f.name)
        if f.metadata.get(OMIT_EMPTY) and not value:
            continue
        if hasattr(value, "to_json"):
            value = value.to_json()
        elif isinstance(value, list):
            value = [v.to_json() if hasattr(v, "to_json") else v for v in value]
        elif isinstance(value, dict):
            value = dict(value)
        out[f.name] = value
    return out


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of `data` that are fields of `cls` (unknown keys ignored)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


@dataclass(frozen=True)
class HiddenJudging:
    """Blind runs (run.json's `oracle`): what the hidden tests said of the candidates after
    the loop (agent/app/protocol.py)."""

    submitted_verdict: str | None = None
    """The submitted patch's verdict (its reason), None when nothing was submitted."""
    judged: dict[str, str] = field(default_factory=dict)
    """attempt id -> the hidden tests' status, for every attempt whose patch was judged."""
    n: int = 0
    """Distinct candidates judged (pass@k's n)."""
    c: int = 0
    """Of them, those the hidden tests passed (pass@k's c)."""
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: object) -> HiddenJudging | None:
        if not isinstance(data, Mapping):
            return None
        values = _known(cls, data)
        values["judged"] = {str(k): str(v) for k, v in dict(values.get("judged") or {}).items()}
        return cls(**values)


@dataclass(frozen=True)
class Tokens:
    """Prompt and completion tokens."""

    prompt: int = 0
    completion: int = 0
    estimated: bool = False
    """Some of the counts are estimates (an endpoint that sends no usage, an answer cut
    short)."""
    counted: bool = False
    """The endpoint counted at least one answer itself (so `estimated` is only in part)."""

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: object) -> Tokens:
        if not isinstance(data, Mapping):
            return cls()
        return cls(int(data.get("prompt") or 0), int(data.get("completion") or 0),
                   bool(data.get("estimated")), bool(data.get("counted")))


@dataclass(frozen=True)
class StageRecord:
    """One verifier stage's outcome in an attempt record."""

    name: str
    status: str
    duration_s: float = 0.0
    summary: str = ""

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)


@dataclass(frozen=True)
class AttemptRecord:
    """One attempts.jsonl line: a finished attempt."""

    attempt_id: str
    round: int = 0
    parent_id: str | None = None
    model: str = ""
    t_start_s: float | None = None
    t_request_s: float | None = None
    t_first_token_s: float | None = None
    t_generated_s: float | None = None
    t_verified_s: float | None = None
    """Seconds since the run started (generation began, its request was sent, first token,
    answer done, verdict)."""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    tokens_estimated: bool = False
    """The counts are estimates (~4 characters a token): the endpoint sent none."""
    finish_reason: str | None = None
    """How the endpoint said the answer ended ("stop", "length", …); None when cut or stopped
    early."""
    patch_sha256: str | None = None
    duplicate_of: str | None = None
    status: str = "pending"
    reason: str = ""
    edit_format: str | None = None
    invalid_reason: str | None = None
    """For an invalid edit: the short name of the reason (EditError.kind)."""
    halted_by: list[str] = field(default_factory=list, metadata={OMIT_EMPTY: True})
    """Rules that halted an earlier answer of this candidate while it streamed (corrected at
    once: the security watchdog)."""
    chars_saved: int = field(default=0, metadata={OMIT_EMPTY: True})
    """Characters the halted answers did not stream (estimated)."""
    dropped: list[dict[str, str]] = field(default_factory=list, metadata={OMIT_EMPTY: True})
    """Files of its patch left out before judging: {"path", "kind", "reason"} each."""
    verifiers: list[StageRecord] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttemptRecord:
        values = _known(cls, data)
        values["attempt_id"] = str(values.get("attempt_id", ""))
        values["verifiers"] = [
            StageRecord(**_known(StageRecord, v)) for v in values.get("verifiers") or []
            if isinstance(v, Mapping)
        ]
        return cls(**values)

    @classmethod
    def of(cls, a: Attempt, model_name: str,
           since: Callable[[float | None], float | None]) -> AttemptRecord:
        """The record of a finished attempt; `since` turns a monotonic instant into seconds
        since the run started."""
        results = a.verdict.results if a.verdict else []
        return cls(
            attempt_id=a.attempt_id,
            round=a.round,
            parent_id=a.parent_id,
            model=a.model or model_name,
            t_start_s=since(a.t_start),
            t_request_s=since(a.t_request),
            t_first_token_s=since(a.t_first_token),
            t_generated_s=since(a.t_generated),
            t_verified_s=since(a.t_verified),
            prompt_tokens=a.prompt_tokens,
            completion_tokens=a.completion_tokens,
            tokens_estimated=a.tokens_estimated,
            finish_reason=a.finish_reason,
            patch_sha256=a.patch_sha256,
            duplicate_of=a.duplicate_of,
            status=a.status,
            reason=a.reason,
            edit_format=a.edit_format,
            invalid_reason=a.invalid_kind,
            halted_by=list(a.halted_by),
            chars_saved=a.chars_saved,
            dropped=[d.to_json() for d in a.dropped],
            verifiers=[StageRecord(r.name, r.status, round(r.duration_s, 3), r.summary)
                       for r in results],
        )


RunStatus = Literal["passed", "failed", "error"]


@dataclass(frozen=True)
class RunSummary:
    """run.json: what one run did and how it ended. Written by the loop when it ends, by the
    run's set-up when it fails before the loop starts, and on Ctrl-C; always through this
    type (agent/core/runlog.py writes it)."""

    run_id: str
    task_id: str
    status: str
    """passed | failed | error"""
    reason: str = ""
    model: str = ""
    samples: int = 0
    rounds: int = 0
    rounds_used: int = 0
    select: str = "first"
    wall_s: float = 0.0
    budget_s: float = 0.0
    winner: str | None = None
    """The winning attempt's id."""
    attempts: int = 0
    """Attempts finished (each has its attempts.jsonl line)."""
    statuses: dict[str, int] = field(default_factory=dict)
    halted: dict[str, int] = field(default_factory=dict, metadata={OMIT_EMPTY: True})
    """Answers halted while they streamed and corrected at once, per rule (the security
    watchdog)."""
    chars_saved: int = field(default=0, metadata={OMIT_EMPTY: True})
    """Characters those answers did not stream (estimated, as in attempts.jsonl)."""
    dropped: dict[str, list[dict[str, str]]] = field(default_factory=dict,
                                                     metadata={OMIT_EMPTY: True})
    """Per attempt whose patch also changed tests or configuration: the files left out
    before judging and why (the rest was judged, and is what it submits)."""
    tokens: Tokens = field(default_factory=Tokens)
    time_to_first_pass_s: float | None = None
    endpoint: dict[str, Any] | None = None
    """What the model client learned of its endpoint (agent/contracts EndpointReport):
    requests at once, the context window; None for a stand-in model."""
    sandbox: str | None = None
    fail_to_pass: list[str] = field(default_factory=list)
    pass_to_pass: list[str] = field(default_factory=list)
    context: dict[str, Any] | None = None
    """What the first prompt showed of the repository (tokens, files) and the fast model's
    votes (agent/context); None when no context was chosen."""
    models: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Per model: role, attempts, tokens, generation time, cost, whether it solved the task."""
    winner_model: str | None = None
    escalate_to: str | None = None
    escalated_at_round: int | None = None
    escalation_reason: str | None = None
    cost_usd: float = 0.0
    protocol: str | None = None
    """blind | oracle (agent/app/protocol.py): which number `resolved` is."""
    hidden_tests: bool = False
    """The task has hidden tests (a test patch)."""
    resolved: bool = False
    """The submitted patch passes the task's tests (blind: the hidden ones, after the loop)."""
    oracle_coverage: bool = False
    """Some candidate would have passed the hidden tests (blind: measured after the loop)."""
    loop_status: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    loop_reason: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    """Blind runs: how the loop itself ended (status and reason then say what the hidden
    tests said of the submitted patch)."""
    oracle: HiddenJudging | None = field(default=None, metadata={OMIT_EMPTY: True})
    regression: dict[str, Any] | None = field(default=None, metadata={OMIT_EMPTY: True})
    """Blind runs: the regression tests (each test file run on the base)."""
    """Blind runs: what the hidden tests said of the candidates (submitted_verdict, judged,
    n, c, seconds)."""
    submitted: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    submitted_verified_s: float | None = field(default=None, metadata={OMIT_EMPTY: True})
    selection: dict[str, Any] | None = field(default=None, metadata={OMIT_EMPTY: True})
    reproduction: dict[str, Any] | None = field(default=None, metadata={OMIT_EMPTY: True})
    """Blind runs: the submitted attempt, when its verdict came, why it was chosen, and the
    reproduction tests written for it."""
    environment: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    """What the tests ran in, when it is not ooda's image as always (the plan's line)."""
    fail_to_pass_passing_before: list[str] = field(default_factory=list,
                                                   metadata={OMIT_EMPTY: True})
    """FAIL_TO_PASS ids that passed on the unpatched code (absent when none)."""
    first: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    handed_over_at_round: int | None = field(default=None, metadata={OMIT_EMPTY: True})
    handover_reason: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    """A run with a first source (`--first`, `--model mutate,FAST`): its name, the first round
    the model answered and why (agent/core/schedule.py)."""
    closest: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    closest_reason: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    """A run that found nothing: the candidate that came nearest (agent/core/selection.py
    `closest`) and what it still fails, one line."""
    base_kept_from: str | None = field(default=None, metadata={OMIT_EMPTY: True})
    """When the unpatched code's tests were not run again: the time (UTC) of the earlier
    check of the same base whose facts this run used (agent/verify/basecache.py)."""
    phases: dict[str, float] | None = field(default=None, metadata={OMIT_EMPTY: True})
    """Where the command's wall time went, in seconds per phase (agent/support/phases.py:
    startup, writing, selection, task, environment, generation, base_check, verification,
    and "other" for what none of them covers), adding up to `command_wall_s`."""
    command_wall_s: float | None = field(default=None, metadata={OMIT_EMPTY: True})
    """The command's own wall time, from its process's (or its client's) start to this
    record; an evaluation's task: from the task's start."""

    def to_json(self) -> dict[str, Any]:
        return _to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunSummary:
        values = _known(cls, data)
        values.setdefault("run_id", "")
        values.setdefault("task_id", "")
        values.setdefault("status", "unfinished")
        values["tokens"] = Tokens.from_json(values.get("tokens"))
        values["oracle"] = HiddenJudging.from_json(values.get("oracle"))
        for name in ("fail_to_pass", "pass_to_pass", "fail_to_pass_passing_before"):
            values[name] = list(values.get(name) or [])
        values["models"] = dict(values.get("models") or {})
        values["statuses"] = dict(values.get("statuses") or {})
        return cls(**values)

    @classmethod
    def error(cls, run_id: str, task_id: str, reason: str) -> RunSummary:
        """The summary of a run that ended before its loop began (nothing attempted)."""
        return cls(run_id, task_id, "error", reason)


@dataclass
class RunResult:
    """What a run ended with."""

    status: RunStatus
    reason: str
    winner: Attempt | None
    attempts: list[Attempt]
    rounds_used: int
    summary: RunSummary
    submitted: Attempt | None = None
    """The candidate a blind run submits: the winner, else the best standing one (None: the
    other selections submit only a winner)."""


ProgressHook = Callable[[Attempt, str], None]
