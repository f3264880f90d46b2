"""One candidate's life, on its own thread: asked of its source, its answer kept, its changes
made a patch, compared with the candidates before it (the same code is verified once),
verified, finished and recorded once.

Apart from the loop (agent/core/loop.py), which plans the rounds and decides when the run
ends: `Candidates` is what every candidate of one run shares (the de-duplication table, the
verification slots, the error that ends the run).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ooda.agent import edits
from ooda.agent.contracts.errors import (
    ContextOverflow,
    GenerationError,
    InfraError,
    UsageError,
    VerificationStopped,
)
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Completion, PatchVerifier, Verdict
from ooda.agent.core import normalize, verify_order
from ooda.agent.core.budget import Budget
from ooda.agent.core.records import Attempt, AttemptRecord, AttemptStatus, ProgressHook
from ooda.agent.core.repo_view import RepoView
from ooda.agent.core.runlog import RunLog
from ooda.agent.core.sources import CandidateSource, Exhausted, Proposal, Request, learns
from ooda.agent.edits import Views
from ooda.agent.support.text import estimate_tokens, one_line
from ooda.tasks.loader import Task

NO_MORE = "the source has no more candidates"
"""Why an attempt the source had nothing for was cancelled (agent/core/sources: Exhausted)."""


@dataclass(frozen=True)
class CandidateContext:
    """What the candidates of one run are made with (the loop's)."""

    task: Task
    verifier: PatchVerifier
    log: RunLog
    config: LoopOptions
    budget: Budget
    work_deadline: float
    """When generation and verification must be over (before the budget's hard deadline)."""
    stop: threading.Event
    progress: ProgressHook
    repo: RepoView
    views_for: Callable[[Attempt], Views]
    source_for: Callable[[Attempt], CandidateSource]
    default_model: str
    """The model name an attempt record gives when the attempt names none."""


class Candidates:
    """Runs candidates (`run`, one per thread) and finishes them (`finish`, once each)."""

    def __init__(self, ctx: CandidateContext) -> None:
        self.ctx = ctx
        self.fatal: InfraError | UsageError | None = None
        """An error that every candidate would meet (endpoint down, key rejected): ends the run."""
        self._lock = threading.Lock()
        self._by_key: dict[str, Attempt] = {}
        self._key_done: dict[str, threading.Event] = {}
        self.finishing = threading.RLock()
        """Held while an attempt's answer is kept or it is finished and recorded (the
        candidates' threads and Ctrl-C's loop)."""
        self._verify_slots = verify_order.VerifySlots(ctx.config.verify_concurrency)
        self._names: list[Mapping[str, int] | None] = []
        """The repository's name counts once built (agent/core/verify_order.py)."""
        self._names_lock = threading.Lock()
        self.decided_by: str | None = None
        """Under select=first, the attempt whose pass decided the run (the others stop)."""

    def run(self, attempt: Attempt) -> None:
        """The whole life of `attempt`; it ends finished and recorded."""
        attempt.t_start = time.monotonic()
        if self.ctx.stop.is_set() or self.ctx.budget.tokens_exhausted():
            self.finish(attempt, "cancelled", "stopped before generation")
            return
        self.ctx.progress(attempt, "generating")
        with self._verify_slots.generating():
            proposal = self._propose(attempt)
            if proposal is None or not self._accept(attempt, proposal):
                return
            if not self._make_patch(attempt, proposal):
                return
            original = self._claim(attempt)
        if original is not None:
            self._copy_verdict(attempt, original)
            return
        self._verify(attempt)

    # ------------------------------------------------------------------ its proposal

    def _propose(self, attempt: Attempt) -> Proposal | None:
        """The source's proposal; None when asking it ended the attempt (an error, a deadline,
        nothing more to propose)."""
        try:
            return self.ctx.source_for(attempt).propose(self.request(attempt),
                                                         self.ctx.work_deadline)
        except Exhausted as exc:  # (why, if the source said: the feedback)
            self.finish(attempt, "cancelled", NO_MORE, feedback=str(exc))
        except ContextOverflow as exc:
            if attempt.parent is None:  # the first prompt, the same for every candidate
                self._fatal(attempt, exc)
            else:
                self.finish(attempt, "error", f"generation: {exc}")
        except (InfraError, UsageError) as exc:
            self._fatal(attempt, exc)
        except Exception as exc:  # endpoint errors end this candidate, not the run
            self._failed(attempt, exc)
        return None

    def _failed(self, attempt: Attempt, exc: Exception) -> None:
        """A request that failed: what arrived is kept, never lost."""
        if isinstance(exc, GenerationError):
            attempt.t_first_token = exc.t_first_token
            self.keep_answer(attempt, exc.partial)
        if isinstance(exc, TimeoutError):
            self.finish(attempt, "timeout", f"generation: {exc}")
        else:
            why = one_line(exc, with_type=not isinstance(exc, GenerationError))
            self.finish(attempt, "error", f"generation failed: {why}")

    def request(self, attempt: Attempt) -> Request:
        """What the source is asked for `attempt`; the answer so far is published on the
        attempt (the live display reads it, Ctrl-C keeps it)."""

        def live(text: str) -> None:
            attempt.streamed_chars = len(text)
            attempt.streamed = text

        run, repo = self.ctx, self.ctx.repo
        return Request(run.task, attempt.attempt_id, attempt.round, attempt.parent,
                       attempt.messages, repo.reader_for(attempt), repo.lister_for(attempt),
                       run.views_for(attempt), repo.read_base, run.verifier, run.config,
                       run.stop, live)

    def _accept(self, attempt: Attempt, proposal: Proposal) -> bool:
        """Keep the proposal's answer; False when the attempt ends with it (a stream check
        stopped it, or the run is over)."""
        completion = proposal.completion
        attempt.messages = proposal.messages
        attempt.halted_by = [h.by for h in proposal.halts]
        attempt.chars_saved = sum(h.saved for h in proposal.halts)
        for number, halt in enumerate(proposal.halts, start=1):  # the halted answers, kept
            self.ctx.log.write_attempt_file(attempt.attempt_id, f"halted-{number}.md",
                                            f"{halt.answer}\n\n---\nHalted ({halt.by}); the "
                                            f"model was told:\n\n{halt.told}\n")
        self.keep_answer(attempt, completion.text, completion)
        invalid = proposal.invalid
        if completion.stopped_early and invalid is not None:  # a stream check stopped it
            attempt.invalid_kind = invalid.kind
            self.finish(attempt, "invalid_edit", invalid.reason, feedback=invalid.told)
            return False
        if self.ctx.stop.is_set() or completion.stopped_early:
            self.finish(attempt, "cancelled", "another candidate passed or the budget ran out")
            return False
        return True

    def keep_answer(self, attempt: Attempt, text: str,
                    completion: Completion | None = None) -> None:
        """Record an answer, whole (`completion`) or the part that arrived before a failure
        (its tokens then estimated), and count its tokens; not once the attempt is finished
        (Ctrl-C finished it with what had arrived)."""
        with self.finishing:
            if attempt.status == "pending" and (completion is not None or text):
                self._kept_answer(attempt, text, completion)

    def _kept_answer(self, attempt: Attempt, text: str, completion: Completion | None) -> None:
        attempt.answer = text
        if completion is not None:
            attempt.prompt_tokens = completion.prompt_tokens
            attempt.completion_tokens = completion.completion_tokens
            attempt.tokens_estimated = completion.tokens_estimated
            attempt.finish_reason = completion.finish_reason
            attempt.t_request = completion.t_request
            attempt.t_first_token = completion.t_first_token
            attempt.t_generated = completion.t_done or time.monotonic()
        else:
            attempt.prompt_tokens = sum(estimate_tokens(m["content"]) for m in attempt.messages)
            attempt.completion_tokens = estimate_tokens(text)
            attempt.tokens_estimated = True
            attempt.t_generated = time.monotonic()
        self.ctx.budget.add_tokens(attempt.prompt_tokens, attempt.completion_tokens,
                                    estimated=attempt.tokens_estimated)
        self.ctx.log.write_attempt_file(attempt.attempt_id, "answer.md", text)

    def _fatal(self, attempt: Attempt, exc: InfraError | UsageError) -> None:
        """An error every candidate would meet: it ends the run. Bad input met before any
        answer (a model the endpoint does not have, a key it refuses, a first prompt over the
        window) is the run's error, not an attempt's failure: the attempt is cancelled."""
        self.fatal = self.fatal or exc
        self.ctx.stop.set()
        bad_input = isinstance(exc, UsageError) and not attempt.answer
        self.finish(attempt, "cancelled" if bad_input else "error", str(exc))

    # ------------------------------------------------------------------ its patch

    def _make_patch(self, attempt: Attempt, proposal: Proposal) -> bool:
        """The proposal's changes on top of the parent's, as a patch; False when there is
        none to verify (the attempt is then an invalid edit)."""
        if proposal.invalid is not None:  # its edits could not be read
            attempt.invalid_kind = proposal.invalid.kind
            self.finish(attempt, "invalid_edit", proposal.invalid.reason,
                        feedback=proposal.invalid.told)
            return False
        read_base = self.ctx.repo.read_base
        try:
            attempt.edit_format = proposal.edit_format
            files = {**attempt.base_files, **proposal.files}
            attempt.files = files
            attempt.patch = edits.make_patch(files, read_base)
        except edits.EditError as exc:
            attempt.invalid_kind = exc.kind
            self.finish(attempt, "invalid_edit", str(exc), feedback=str(exc))
            return False
        if not attempt.patch.strip():
            attempt.invalid_kind = "no_op"
            reason = "the edits leave every file as it was originally"
            self.finish(attempt, "invalid_edit", reason, feedback=reason)
            return False
        attempt.patch_sha256 = hashlib.sha256(attempt.patch.encode()).hexdigest()
        attempt.code_key = normalize.normalized_key(files, read_base)
        self.ctx.log.write_attempt_file(attempt.attempt_id, "patch.diff", attempt.patch)
        return True

    def _claim(self, attempt: Attempt) -> Attempt | None:
        """The earlier attempt with the same code (up to formatting), or None after
        registering this one as its owner."""
        assert attempt.code_key is not None
        with self._lock:
            original = self._by_key.get(attempt.code_key)
            if original is None:
                self._by_key[attempt.code_key] = attempt
                self._key_done[attempt.code_key] = threading.Event()
            return original

    def _copy_verdict(self, attempt: Attempt, original: Attempt) -> None:
        attempt.duplicate_of = original.attempt_id
        assert attempt.code_key is not None
        done = self._key_done[attempt.code_key]
        done.wait(timeout=max(0.0, self.ctx.budget.deadline - time.monotonic()))
        if not done.is_set() or original.status in ("cancelled", "pending"):
            self.finish(attempt, "cancelled", f"duplicate of {original.attempt_id}, not verified")
            return
        attempt.verdict = original.verdict
        attempt.invalid_kind = original.invalid_kind
        if original.dropped:  # the same code: the same files left out
            attempt.dropped, attempt.patch = list(original.dropped), original.patch
        same = "identical to" if attempt.patch_sha256 == original.patch_sha256 else (
            "the same code up to formatting as"
        )
        self.finish(attempt, original.status, f"{same} {original.attempt_id}: {original.reason}",
                    feedback=original.feedback)

    def _verify(self, attempt: Attempt) -> None:
        assert attempt.code_key is not None
        run = self.ctx
        try:
            with self._verify_slots.slot(self._priority(attempt)):
                if run.stop.is_set():
                    self.finish(attempt, "cancelled", f"{self._stopped()} before verification")
                    return
                run.progress(attempt, "verifying")
                verdict = run.verifier.verify(
                    attempt.patch,
                    log_dir=run.log.attempt_dir(attempt.attempt_id),
                    deadline=run.work_deadline,
                    # no round learns from it
                    verdict_only=attempt.round >= run.config.rounds
                    or not learns(run.source_for(attempt)),
                    stop=run.stop,  # once decided, a verification under way stops
                )
                if verdict.status == "passed" and run.config.select == "first":
                    with self._lock:
                        self.decided_by = self.decided_by or attempt.attempt_id
                    run.stop.set()  # decided: no waiting candidate takes the slot it frees
            attempt.verdict = verdict
            if verdict.dropped:
                self._judged_without(attempt, verdict)
            if verdict.status == "invalid_edit":
                attempt.invalid_kind = verdict.kind or "patch_rejected"
            self.finish(attempt, verdict.status, verdict.reason, feedback=verdict.feedback)
        except VerificationStopped:  # no verdict: never "failed"
            self.finish(attempt, "cancelled", f"{self._stopped()} while being verified")
        except InfraError as exc:  # the sandbox is broken for every candidate
            self.fatal = exc
            run.stop.set()
            self.finish(attempt, "error", str(exc))
        except Exception as exc:
            self.finish(attempt, "error", f"verification failed: {one_line(exc, with_type=True)}")
            raise
        finally:
            self._key_done[attempt.code_key].set()

    def _judged_without(self, attempt: Attempt, verdict: Verdict) -> None:
        """The verifier left some files of the patch out (tests, configuration): the attempt's
        patch (and patch.diff) and files become what was judged, so what a run submits, and
        what a next round starts from, is that (the answer keeps what was proposed)."""
        attempt.dropped = list(verdict.dropped)
        if verdict.patch is None:  # nothing was left to judge: an invalid edit
            return
        left_out = {d.path for d in verdict.dropped}
        attempt.patch = verdict.patch
        attempt.patch_sha256 = hashlib.sha256(attempt.patch.encode()).hexdigest()
        attempt.files = {path: text for path, text in attempt.files.items()
                         if path not in left_out}
        self.ctx.log.write_attempt_file(attempt.attempt_id, "patch.diff", attempt.patch)

    def _stopped(self) -> str:
        """Why a candidate is not verified (further): the run was decided or ended."""
        if self.decided_by is not None:
            return f"stopped: run decided ({self.decided_by} passed)"
        return "stopped: the run ended"

    def _priority(self, attempt: Attempt) -> int:
        """Where `attempt` waits for a sandbox (agent/core/verify_order.py): an inert change
        after every other. Worked out for every candidate (milliseconds: the changed files
        parsed; the repository's names read once, and only for a helper-only change): those
        that finish streaming together would all see a free slot before any takes one."""
        return verify_order.priority(attempt.files, self.ctx.repo.read_base, self._repo_names)

    def _repo_names(self) -> Mapping[str, int] | None:
        with self._names_lock:
            if not self._names:
                repo = self.ctx.repo
                self._names.append(verify_order.name_counts(repo.repo, repo.files()))
            return self._names[0]

    # ------------------------------------------------------------------ its end

    def finish(self, attempt: Attempt, status: AttemptStatus, reason: str,
               feedback: str = "") -> None:
        """End `attempt` (once: later calls change nothing) and write its record."""
        with self.finishing:
            if attempt.status != "pending":
                return
            attempt.status = status
            attempt.reason = reason
            attempt.feedback = feedback or reason
            attempt.t_verified = time.monotonic()
            self.ctx.log.record_attempt(AttemptRecord.of(attempt, self.ctx.default_model,
                                                          self.ctx.budget.since_start))
        self.ctx.progress(attempt, status)

    def interrupted(self, attempts: list[Attempt], reason: str) -> None:
        """Ctrl-C: every attempt still under way ends now, "cancelled", with the part of its
        answer that had arrived kept (its tokens estimated) and its record written. A
        candidate's thread that finishes later changes nothing: an attempt is finished once."""
        for attempt in attempts:
            with self.finishing:
                if attempt.status == "pending" and not attempt.answer and attempt.streamed:
                    self.keep_answer(attempt, attempt.streamed)
                self.finish(attempt, "cancelled", reason)
