"""The best-of-N loop: sample candidates in parallel, verify each, feed failures back.

One round starts `samples` candidates at once on a thread pool. Each candidate is generated
(streamed from the model), parsed into a patch, de-duplicated and verified in the sandbox as
soon as its generation ends. The next round's candidates continue from the failed ones of the
round before (their patch plus what failed). The run stops at the first passing candidate
(`select="first"`), or picks among a round's passing ones (`select="best"`), or when the
rounds, the tokens or the wall-clock budget run out.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ooda.agent import edits
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import Model
from ooda.agent.core import normalize, prompts
from ooda.agent.core.budget import Budget
from ooda.agent.core.runlog import RunLog

if TYPE_CHECKING:
    from ooda.agent.contracts.protocols import Verdict
    from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task

AttemptStatus = Literal[
    "pending", "passed", "failed", "invalid_edit", "timeout", "cancelled", "error"
]
_REPLACE_LINE = re.compile(r"^[ \t]*>{5,9} ?REPLACE\b.*\n", re.MULTILINE)
"""A completed end-of-block line (the forms agent/edits/__init__.py accepts)."""
# How far a failed attempt got: later stages make better parents for the next round.
STAGE_RANK = {"mypy": 5, "pytest": 4, "ruff": 2, "syntax": 1}
"""agent/verify/verifier.py runs mypy last, only for candidates whose tests pass."""


@dataclass
class LoopConfig:
    """How one task is attacked."""

    samples: int = 4
    """Candidates sampled in parallel per round."""
    rounds: int = 3
    """Feedback rounds at most."""
    time_budget_s: float = 600.0
    """Hard wall-clock deadline for the whole task: generation, verification and clean-up."""
    max_tokens: int | None = None
    """Prompt plus completion tokens for the whole run; None for no limit."""
    select: Literal["first", "best"] = "first"
    """"first": stop at the first passing candidate; "best": finish the round and pick."""
    verify_concurrency: int = 2
    """Candidates verified at once (verification is CPU-bound)."""
    sibling_digest: bool = True
    """Tell each next-round candidate how its parent's siblings failed."""


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
    t_start: float | None = None
    t_first_token: float | None = None
    t_generated: float | None = None
    t_verified: float | None = None
    edit_format: str | None = None
    """The edit format the answer was read in (ooda.agent.edits.FORMATS); None when invalid."""
    invalid_kind: str | None = None
    """For an invalid edit: the short name of the reason (EditError.kind)."""

    @property
    def parent_id(self) -> str | None:
        return self.parent.attempt_id if self.parent else None

    def feedback_for_child(self, siblings: list[str]) -> str:
        """The user message a next-round candidate continuing from this attempt receives."""
        headline = self.reason.splitlines()[0] if self.reason else self.status
        details = self.verdict.feedback if self.verdict else self.feedback
        others = [s for s in siblings if not s.startswith(headline[:160])]
        return prompts.feedback_prompt(
            self.status, headline, "" if details == headline else details, self.patch, others[:3]
        )

    def failed_stage(self) -> str:
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


ProgressHook = Callable[[Attempt, str], None]


class Loop:
    """Runs one task to a verdict; everything it does is written to a RunLog."""

    def __init__(
        self,
        task: Task,
        model: Model,
        verifier: TaskVerifier,
        log: RunLog,
        config: LoopConfig,
        progress: ProgressHook | None = None,
    ) -> None:
        self.task = task
        self.model = model
        self.verifier = verifier
        self.log = log
        self.config = config
        self.progress = progress or (lambda attempt, state: None)
        self.budget = Budget(config.time_budget_s, config.max_tokens)
        # Leave time to tear sandboxes down before the hard deadline.
        self.work_deadline = self.budget.deadline - min(2.0, 0.05 * config.time_budget_s)
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []
        self._by_sha: dict[str, Attempt] = {}
        self._sha_done: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._verify_slots = threading.BoundedSemaphore(max(1, config.verify_concurrency))
        self.fatal: InfraError | UsageError | None = None
        """An error that every candidate would meet (endpoint down, key rejected): ends the run."""
        self._repo_files: list[str] | None = None

    # ------------------------------------------------------------------ the loop

    def run(self) -> RunResult:
        """Run rounds until a candidate passes or a budget runs out."""
        winner: Attempt | None = None
        reason = "no candidate passed"
        parents: list[Attempt | None] = [None]
        rounds_used = 0
        pool = ThreadPoolExecutor(max_workers=max(1, self.config.samples))
        try:
            for round_no in range(1, self.config.rounds + 1):
                if self.budget.expired() or time.monotonic() >= self.work_deadline:
                    reason = "budget"
                    break
                if self.budget.tokens_exhausted():
                    reason = "tokens"
                    break
                rounds_used = round_no
                batch = self._plan_round(round_no, parents)
                winner = self._run_round(pool, batch)
                if winner is not None:
                    break
                if self.fatal is not None:
                    break
                if self.stop.is_set() and time.monotonic() >= self.work_deadline:
                    reason = "budget"
                    break
                parents = self._pick_parents(batch)
            else:
                reason = "rounds exhausted"
        except BaseException:
            # Ctrl-C (or a bug): candidates wind down, but no one waits for a request that hangs
            self.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
        if winner is None and self.budget.expired():
            reason = "budget"
        status: Literal["passed", "failed", "error"] = "passed" if winner else "failed"
        if winner is None and self.attempts and all(a.status == "error" for a in self.attempts):
            status, reason = "error", self.attempts[-1].reason or "every attempt errored"
        if winner is not None:
            reason = "passed"
            self.log.write_final_diff(winner.patch)
        if self.fatal is not None:
            status, reason = "error", str(self.fatal)
        summary = self._summary(status, reason, winner, rounds_used)
        self.log.write_summary(summary)
        if self.fatal is not None:
            raise self.fatal
        return RunResult(status, reason, winner, list(self.attempts), rounds_used, summary)

    def _plan_round(self, round_no: int, parents: list[Attempt | None]) -> list[Attempt]:
        batch = []
        siblings = self._sibling_digest(parents) if self.config.sibling_digest else []
        for i in range(self.config.samples):
            parent = parents[i % len(parents)]
            if parent is None:
                messages = prompts.first_prompt(self.task)
            else:
                messages = _trim_history(
                    parent.messages
                    + [{"role": "assistant", "content": parent.answer}]
                    + [{"role": "user", "content": parent.feedback_for_child(siblings)}]
                )
            attempt = Attempt(f"r{round_no}c{i + 1}", round_no, parent, messages)
            batch.append(attempt)
        with self._lock:
            self.attempts += batch
        return batch

    def _run_round(self, pool: ThreadPoolExecutor, batch: list[Attempt]) -> Attempt | None:
        futures: dict[Future[None], Attempt] = {pool.submit(self._candidate, a): a for a in batch}
        pending = set(futures)
        passing: list[Attempt] = []
        while pending:
            timeout = max(0.05, self.budget.deadline - time.monotonic())
            done, pending = wait(pending, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:
                self.stop.set()  # the deadline passed: everything still running winds down
                continue
            for fut in done:
                attempt = futures[fut]
                if fut.exception() is not None:
                    self._finish(attempt, "error", f"internal error: {fut.exception()}")
                if attempt.status == "passed":
                    passing.append(attempt)
                    if self.config.select == "first":
                        self.stop.set()
        if not passing:
            return None
        if self.config.select == "first":
            return min(passing, key=lambda a: a.t_verified or 0.0)
        return _pick_best(passing, self.attempts)

    # ------------------------------------------------------------------ one candidate

    def _candidate(self, attempt: Attempt) -> None:
        attempt.t_start = time.monotonic()
        if self.stop.is_set() or self.budget.tokens_exhausted():
            self._finish(attempt, "cancelled", "stopped before generation")
            return
        self.progress(attempt, "generating")
        try:
            completion = self.model.complete(
                attempt.messages,
                deadline=self.work_deadline,
                on_text=self._stream_watcher(attempt),
            )
        except (InfraError, UsageError) as exc:
            self.fatal = exc
            self.stop.set()
            self._finish(attempt, "error", str(exc))
            return
        except TimeoutError as exc:
            self._finish(attempt, "timeout", f"generation: {exc}")
            return
        except Exception as exc:  # endpoint errors end this candidate, not the run
            self._finish(attempt, "error", f"generation failed: {_one_line(exc)}")
            return
        attempt.answer = completion.text
        attempt.t_first_token = completion.t_first_token
        attempt.t_generated = completion.t_done or time.monotonic()
        attempt.prompt_tokens = completion.prompt_tokens
        attempt.completion_tokens = completion.completion_tokens
        self.budget.add_tokens(completion.prompt_tokens, completion.completion_tokens)
        self.log.write_attempt_file(attempt.attempt_id, "answer.md", completion.text)
        if completion.stopped_early and attempt.reason:
            self._finish(attempt, "invalid_edit", attempt.reason, feedback=attempt.reason)
            return
        if self.stop.is_set() or completion.stopped_early:
            self._finish(attempt, "cancelled", "another candidate passed or the budget ran out")
            return
        if not self._make_patch(attempt):
            return
        original = self._claim_patch(attempt)
        if original is not None:
            self._copy_verdict(attempt, original)
            return
        self._verify(attempt)

    def _stream_watcher(self, attempt: Attempt) -> Callable[[str], bool]:
        """on_text hook: stop a stream once the run is over or its edits cannot apply.

        The answer is re-parsed only when another `>>>>>>> REPLACE` line is complete (its
        newline has arrived: edits.partial_answer_is_hopeless ignores an unfinished last line),
        and only the newly completed lines are scanned for it."""
        scanned = 0

        def keep_going(text: str) -> bool:
            nonlocal scanned
            if self.stop.is_set():
                return False
            end = text.rfind("\n") + 1
            if end <= scanned:
                return True
            completed = _REPLACE_LINE.search(text, scanned, end) is not None
            scanned = end
            if completed:
                problem = edits.partial_answer_is_hopeless(text, self._reader_for(attempt))
                if problem:
                    attempt.reason = f"stopped while streaming: {problem}"
                    return False
            return True

        return keep_going

    def _reader_for(self, attempt: Attempt) -> Callable[[str], str | None]:
        """Reads files as this attempt sees them: the original, with its parent's edits."""
        parent = attempt.parent
        # An invalid edit was never applied: its child starts again from the original files.
        parent_files = parent.files if parent and parent.status != "invalid_edit" else {}
        base = self.task.repo

        def read(path: str) -> str | None:
            return parent_files[path] if path in parent_files else _read_text(base / path)

        return read

    def _lister_for(self, attempt: Attempt) -> Callable[[], list[str]]:
        """Lists the files this attempt sees: the repository's (walked once), with the files
        its parent created."""
        parent = attempt.parent
        created = list(parent.files) if parent and parent.status != "invalid_edit" else []

        def listing() -> list[str]:
            if self._repo_files is None:
                self._repo_files = _list_repo(self.task.repo)
            return sorted({*self._repo_files, *created})

        return listing

    def _make_patch(self, attempt: Attempt) -> bool:
        base = self.task.repo
        parent = attempt.parent
        parent_files = parent.files if parent and parent.status != "invalid_edit" else {}
        try:
            parsed = edits.parse_edits(
                attempt.answer, self._reader_for(attempt), self._lister_for(attempt)
            )
            attempt.edit_format = parsed.edit_format
            files = {**parent_files, **parsed.files}
            attempt.files = files
            attempt.patch = edits.make_patch(files, lambda p: _read_text(base / p))
        except edits.EditError as exc:
            attempt.invalid_kind = exc.kind
            self._finish(attempt, "invalid_edit", str(exc), feedback=str(exc))
            return False
        if not attempt.patch.strip():
            attempt.invalid_kind = "no_op"
            reason = "the edits leave every file as it was originally"
            self._finish(attempt, "invalid_edit", reason, feedback=reason)
            return False
        attempt.patch_sha256 = hashlib.sha256(attempt.patch.encode()).hexdigest()
        attempt.code_key = normalize.normalized_key(files, lambda p: _read_text(base / p))
        self.log.write_attempt_file(attempt.attempt_id, "patch.diff", attempt.patch)
        return True

    def _claim_patch(self, attempt: Attempt) -> Attempt | None:
        """Return the earlier attempt with the same code (up to formatting), or register this
        one as its owner."""
        assert attempt.code_key is not None
        with self._lock:
            original = self._by_sha.get(attempt.code_key)
            if original is None:
                self._by_sha[attempt.code_key] = attempt
                self._sha_done[attempt.code_key] = threading.Event()
            return original

    def _copy_verdict(self, attempt: Attempt, original: Attempt) -> None:
        attempt.duplicate_of = original.attempt_id
        assert attempt.code_key is not None
        done = self._sha_done[attempt.code_key]
        done.wait(timeout=max(0.0, self.budget.deadline - time.monotonic()))
        if not done.is_set() or original.status in ("cancelled", "pending"):
            self._finish(attempt, "cancelled", f"duplicate of {original.attempt_id}, not verified")
            return
        attempt.verdict = original.verdict
        same = "identical to" if attempt.patch_sha256 == original.patch_sha256 else (
            "the same code up to formatting as"
        )
        self._finish(
            attempt,
            original.status,
            f"{same} {original.attempt_id}: {original.reason}",
            feedback=original.feedback,
        )

    def _verify(self, attempt: Attempt) -> None:
        assert attempt.code_key is not None
        try:
            with self._verify_slots:
                if self.stop.is_set():
                    self._finish(attempt, "cancelled", "stopped before verification")
                    return
                self.progress(attempt, "verifying")
                verdict = self.verifier.verify(
                    attempt.patch,
                    log_dir=self.log.attempt_dir(attempt.attempt_id),
                    deadline=self.work_deadline,
                    verdict_only=attempt.round >= self.config.rounds,  # no round learns from it
                )
            attempt.verdict = verdict
            self._finish(attempt, verdict.status, verdict.reason, feedback=verdict.feedback)
        except InfraError as exc:  # the sandbox is broken for every candidate
            self.fatal = exc
            self.stop.set()
            self._finish(attempt, "error", str(exc))
        except Exception as exc:
            self._finish(attempt, "error", f"verification failed: {_one_line(exc)}")
            raise
        finally:
            self._sha_done[attempt.code_key].set()

    def _finish(self, attempt: Attempt, status: str, reason: str, feedback: str = "") -> None:
        if attempt.status != "pending":
            return
        attempt.status = status  # type: ignore[assignment]
        attempt.reason = reason
        attempt.feedback = feedback or reason
        attempt.t_verified = time.monotonic()
        self.log.record_attempt(self._attempt_record(attempt))
        self.progress(attempt, status)

    # ------------------------------------------------------------------ next round

    def _pick_parents(self, batch: list[Attempt]) -> list[Attempt | None]:
        """Failed attempts of this round, those that got furthest first, duplicates last."""
        failed = [a for a in batch if a.status in ("failed", "invalid_edit", "timeout")]
        if not failed:
            return [None]
        failed.sort(
            key=lambda a: (a.duplicate_of is not None, -STAGE_RANK.get(a.failed_stage(), 0))
        )
        return list(failed)

    def _sibling_digest(self, parents: list[Attempt | None]) -> list[str]:
        reasons = Counter(p.reason.splitlines()[0][:160] for p in parents if p is not None)
        return [f"{reason} (x{n})" if n > 1 else reason for reason, n in reasons.most_common(4)]

    # ------------------------------------------------------------------ records

    def _attempt_record(self, a: Attempt) -> dict[str, Any]:
        since = self.budget.since_start
        results = a.verdict.results if a.verdict else []
        return {
            "attempt_id": a.attempt_id,
            "round": a.round,
            "parent_id": a.parent_id,
            "model": self.model.name,
            "t_start_s": since(a.t_start),
            "t_first_token_s": since(a.t_first_token),
            "t_generated_s": since(a.t_generated),
            "t_verified_s": since(a.t_verified),
            "prompt_tokens": a.prompt_tokens,
            "completion_tokens": a.completion_tokens,
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

    def _summary(
        self, status: str, reason: str, winner: Attempt | None, rounds_used: int
    ) -> dict[str, Any]:
        return {
            "run_id": self.log.run_id,
            "task_id": self.task.id,
            "status": status,
            "reason": reason,
            "model": self.model.name,
            "samples": self.config.samples,
            "rounds": self.config.rounds,
            "rounds_used": rounds_used,
            "select": self.config.select,
            "wall_s": round(self.budget.elapsed(), 3),
            "budget_s": self.config.time_budget_s,
            "winner": winner.attempt_id if winner else None,
            "attempts": len([a for a in self.attempts if a.status != "pending"]),
            "statuses": dict(Counter(a.status for a in self.attempts)),
            "tokens": {
                "prompt": self.budget.prompt_tokens,
                "completion": self.budget.completion_tokens,
            },
            "time_to_first_pass_s": self.budget.since_start(winner.t_verified) if winner else None,
            "sandbox": getattr(getattr(self.verifier, "backend", None), "name", None),
            "fail_to_pass": list(self.task.fail_to_pass),
            "pass_to_pass": list(self.task.pass_to_pass),
        }


def _pick_best(passing: list[Attempt], everyone: list[Attempt]) -> Attempt:
    """Smallest diff; ties go to the patch that most candidates produced, then the earliest."""
    votes = Counter(a.patch_sha256 for a in everyone if a.patch_sha256)

    def size(a: Attempt) -> int:
        return sum(
            1
            for line in a.patch.splitlines()
            if line[:1] in "+-" and not line.startswith(("+++", "---"))
        )

    return min(passing, key=lambda a: (size(a), -votes[a.patch_sha256 or ""], a.t_verified or 0.0))


def _trim_history(messages: list[dict[str, str]], keep_exchanges: int = 2) -> list[dict[str, str]]:
    """Keep the system prompt, the task prompt and the last few answer/feedback exchanges."""
    head, rest = messages[:2], messages[2:]
    return head + rest[-2 * keep_exchanges :]


def _list_repo(root: Path) -> list[str]:
    """The repository's files, repo-relative, skipping VCS, cache and virtualenv folders
    (an iterative walk: no recursion limit on deep trees)."""
    found: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in prompts.SKIP_DIRS]
        rel = Path(folder).relative_to(root)
        found += [(rel / n).as_posix() for n in names]
    return found


def _read_text(path: Path) -> str | None:
    """A base file's text; None when it is missing or unreadable as UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]
