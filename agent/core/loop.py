"""The best-of-N loop: sample candidates in parallel, verify each, feed failures back.

One round starts `samples` candidates at once on a thread pool. Each candidate is generated
(streamed from the model), parsed into a patch, de-duplicated and verified in the sandbox as
soon as its generation ends. The next round's candidates continue from the failed ones of the
round before (their patch plus what failed). The run stops at the first passing candidate
(`select="first"`), or picks among a round's passing ones (`select="best"`), or when the
rounds, the tokens or the wall-clock budget run out.

Which model answers a round is the schedule's choice (agent/core/schedule.py): one model, or a
fast one escalating to a strong one, which then starts from the task and a digest of the fast
model's best failures.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any, Literal

from ooda.agent import edits
from ooda.agent.context import Context, votes
from ooda.agent.context.index import RepoIndex
from ooda.agent.context.rank import Ranking
from ooda.agent.context.widen import widen
from ooda.agent.contracts.errors import ContextOverflow, GenerationError, InfraError, UsageError
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import (
    Completion,
    EndpointReport,
    KnowsWindow,
    Model,
    PatchVerifier,
)
from ooda.agent.core import blind_select, normalize, prompts, selection
from ooda.agent.core.budget import Budget
from ooda.agent.core.critic import Critic
from ooda.agent.core.records import (
    Attempt,
    AttemptRecord,
    AttemptStatus,
    ProgressHook,
    RunResult,
    RunSummary,
    Tokens,
)
from ooda.agent.core.repo_view import RepoView
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog
from ooda.agent.core.schedule import ModelSchedule, Tier, digest, per_model
from ooda.agent.core.sources import (
    CandidateSource,
    Exhausted,
    Proposal,
    Request,
    as_source,
    model_of,
)
from ooda.agent.edits import FileView, Views
from ooda.agent.support.text import estimate_tokens, one_line, valid_utf8
from ooda.tasks.loader import Task

ANSWER_ROOM = 4096
"""Tokens of the model's window the first prompt leaves for an answer (at most a quarter)."""
WINDOW_SHARE = 0.85
"""The context counts ~3.5 characters a token; a window is filled as if ~3 (agent/models)."""

__all__ = ["INTERRUPTED", "Attempt", "AttemptStatus", "Loop", "LoopOptions", "ProgressHook",
           "RunResult"]
"""The records are re-exported: callers take Loop, its options and its results from here."""
NO_MORE = "the source has no more candidates"
"""Why an attempt the source had nothing for was cancelled (agent/core/sources: Exhausted)."""
INTERRUPTED = "interrupted (Ctrl-C)"
"""The reason run.json and the attempts under way give when the user pressed Ctrl-C."""


class Loop:
    """Runs one task to a verdict; everything it does is written to a RunLog."""

    def __init__(
        self,
        task: Task,
        model: Model | CandidateSource,
        verifier: PatchVerifier,
        log: RunLog,
        config: LoopOptions,
        progress: ProgressHook | None = None,
        schedule: ModelSchedule | None = None,
        repro: ReproWriter | None = None,
        *,
        sandbox: str | None = None,
    ) -> None:
        """`model` (a model, asked through the LLM source, or any candidate source) answers
        every round, unless `schedule` (whose fast tier it should be) says which source answers
        each round. `repro`: a blind run's reproduction-test writer,
        started with the first round (its tokens count in the budget). `sandbox`: the name of
        the backend `verifier` runs candidates on (run.json's `sandbox`)."""
        self.task = task
        self.source = as_source(model)
        self.schedule = schedule or ModelSchedule.single(self.source)
        self.verifier = verifier
        self.sandbox = sandbox
        self.log = log
        self.config = config
        self.progress = progress or (lambda attempt, state: None)
        self.budget = Budget(config.time_budget_s, config.token_budget)
        # Leave time to tear sandboxes down before the hard deadline.
        self.work_deadline = self.budget.deadline - min(2.0, 0.05 * config.time_budget_s)
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []
        self._by_sha: dict[str, Attempt] = {}
        self._sha_done: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._finishing = threading.RLock()
        """Held while an attempt's answer is kept or it is finished and recorded (the
        candidates' threads and Ctrl-C's _interrupted)."""
        self._verify_slots = threading.BoundedSemaphore(max(1, config.verify_concurrency))
        self.fatal: InfraError | UsageError | None = None
        """An error that every candidate would meet (endpoint down, key rejected): ends the run."""
        self.repo = RepoView(task.repo)
        self._context: Context | None = None
        self.context_votes: votes.Votes | None = None
        """What the fast model said about where the change belongs (None: not asked)."""
        self.repro = repro
        judge = self.schedule.strong or self.schedule.fast
        critic_model = model_of(judge.source) if config.select == "blind" else None
        self.critic = (Critic(task, critic_model, self.budget, config.critic)
                       if critic_model is not None and config.critic > 0 else None)
        """A blind run's critic: the model's judgement of the finalists (agent/core/critic.py)."""
        self.selection: dict[str, Any] = {}
        """Why the blind selection chose what it chose (run.json `selection`)."""

    @property
    def context(self) -> Context:
        """The code the first prompt shows (chosen once, on first use), within
        `context_tokens` and what the fast model's window leaves for an answer."""
        if self._context is None:
            asks = self.config.context_votes > 0 and model_of(self.schedule.fast.source)
            refine = self._votes if asks else None
            self._context = prompts.context_for(self.task, self.context_tokens(),
                                                refine=refine)
        return self._context

    def _votes(self, index: RepoIndex, ranking: Ranking) -> Ranking:
        """The fast model's votes on the ranking (its tokens counted like any other)."""
        model = model_of(self.schedule.fast.source)
        assert model is not None  # votes are asked only of a model (context_tokens)
        found = votes.ask(model, self.task.id, self.task.statement, index,
                          ranking, self.config.context_votes, self.work_deadline)
        self.budget.add_tokens(found.prompt_tokens, found.completion_tokens)
        self.context_votes = found
        return votes.merged(ranking, found)

    def context_tokens(self) -> int:
        """`context_tokens`, lowered to fit the fast model's window when it is known: the
        window less room for an answer, in the context's own (less cautious) token count."""
        budget = self.config.context_tokens
        model = model_of(self.schedule.fast.source)
        window = model.context_window() if isinstance(model, KnowsWindow) else None
        if window:
            answer = min(ANSWER_ROOM, window // 4)
            budget = min(budget, int((window - answer) * WINDOW_SHARE))
        return max(1, budget)

    def views_for(self, attempt: Attempt) -> Views:
        """What the model answering `attempt` saw of the files: the first prompt's views,
        and whole the files its parent created."""
        views: dict[str, FileView] = dict(self.context.views())
        for path, lines in attempt.revealed.items():
            if path in views:
                views[path] = views[path].reveal(lines)
        for path in attempt.base_files:
            if path not in views:
                views[path] = FileView(path)
        return views

    def _feedback(self, parent: Attempt, siblings: list[str]) -> tuple[str, dict[str, set[int]]]:
        """The message a child of `parent` gets: what failed, and the code the failure names
        that the conversation has not shown yet (agent/context/widen.py); the lines it
        reveals, with those revealed before."""
        message = parent.feedback_for_child(siblings)
        revealed = {path: set(lines) for path, lines in parent.revealed.items()}
        failure = parent.verdict.feedback if parent.verdict else parent.feedback
        widening = widen(self.task.repo, self.views_for(parent), failure or "")
        for path, lines in widening.revealed.items():
            revealed.setdefault(path, set()).update(lines)
        if widening.text:
            message = f"{message}\n\n{widening.text}"
        return message, revealed

    # ------------------------------------------------------------------ the loop

    def run(self) -> RunResult:
        """Run rounds until a candidate passes or a budget runs out."""
        winner: Attempt | None = None
        reason = "no candidate passed"
        parents: list[Attempt | None] = [None]
        rounds_used = 0
        pool = ThreadPoolExecutor(max_workers=max(1, self.config.samples))
        if self.repro is not None:
            self.repro.start(self.budget, self.work_deadline, self.stop)
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
                if all(a.reason == NO_MORE for a in batch):  # the source's turn is over
                    if not self.schedule.exhausted():
                        reason = NO_MORE
                        break
                if self.stop.is_set() and time.monotonic() >= self.work_deadline:
                    reason = "budget"
                    break
                parents = selection.pick_parents(batch)
            else:
                reason = "rounds exhausted"
        except BaseException as exc:
            # Ctrl-C (or a bug): candidates wind down, but no one waits for a request that hangs
            self.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            if isinstance(exc, KeyboardInterrupt):
                self._interrupted(rounds_used)
            raise
        pool.shutdown(wait=True)
        submitted = winner
        if self.config.select == "blind" and winner is None:
            submitted, self.selection = blind_select.choose(
                self.attempts, self.attempts, self.critic, self.work_deadline)
        if self.repro is not None:
            self.repro.join(timeout_s=max(1.0, self.budget.remaining()))
        if winner is None and self.budget.expired():
            reason = "budget"
        status: Literal["passed", "failed", "error"] = "passed" if winner else "failed"
        if winner is None and self.attempts and all(a.status == "error" for a in self.attempts):
            status, reason = "error", self.attempts[-1].reason or "every attempt errored"
        elif winner is None and self.attempts and not any(map(_whole_answer, self.attempts)):
            status, reason = "error", _no_answer_reason(self.attempts, reason)
        if winner is not None:
            reason = "passed"
            if self.config.select != "blind":  # a blind run's judge writes it, if resolved
                self.log.write_final_diff(winner.patch)
        if self.fatal is not None:
            status, reason = "error", str(self.fatal)
        summary = self._summary(status, reason, winner, rounds_used, submitted)
        self.log.write_summary(summary)
        if self.fatal is not None:
            raise self.fatal
        return RunResult(status, reason, winner, list(self.attempts), rounds_used, summary,
                         submitted)

    def _interrupted(self, rounds_used: int) -> None:
        """Ctrl-C: every attempt still under way ends now, "cancelled", with the part of its
        answer that had arrived kept (its tokens estimated) and its record written; then the
        run's summary, which agrees with attempts.jsonl. A candidate's thread that finishes
        later changes nothing: an attempt is finished once."""
        with contextlib.suppress(Exception):  # best effort: the user is waiting
            for attempt in list(self.attempts):
                with self._finishing:
                    if attempt.status == "pending" and not attempt.answer and attempt.streamed:
                        self._keep_answer(attempt, attempt.streamed)
                    self._finish(attempt, "cancelled", INTERRUPTED)
            self.log.write_summary(self._summary("error", INTERRUPTED, None, rounds_used))

    def _budget_left(self) -> float:
        """The fraction of the budget left: the smaller of time and tokens."""
        left = self.budget.remaining() / self.config.time_budget_s
        if self.config.token_budget:
            used = self.budget.prompt_tokens + self.budget.completion_tokens
            left = min(left, 1 - used / self.config.token_budget)
        return left

    def _plan_round(self, round_no: int, parents: list[Attempt | None]) -> list[Attempt]:
        batch = []
        tier = self.schedule.tier_for(round_no, self.config.rounds, self._budget_left())
        escalating = self.schedule.starts_afresh(round_no)
        if escalating:  # the tier before's best failures (from any round: the last may
            # have had none, a source with nothing left)
            before = [p for p in parents if p is not None] or [
                a for a in selection.pick_parents(self.attempts) if a is not None]
        told = digest(before) if escalating else ""
        learns = _learns(tier.source)
        if escalating or not learns:
            parents = [None]  # the strong model starts from the task, told of the failures
        siblings = selection.sibling_digest(parents) if self.config.sibling_digest else []
        for i in range(getattr(tier.source, "samples", None) or self.config.samples):
            parent = parents[i % len(parents)]
            if not learns:  # a source that reads no prompt (--model mutate)
                messages: list[dict[str, str]] = []
            elif parent is None:
                messages = prompts.first_prompt(self.task, self.context, told=told)
            else:
                feedback, revealed = self._feedback(parent, siblings)
                messages = selection.trim_history(
                    parent.messages
                    + [{"role": "assistant", "content": valid_utf8(parent.answer)}]
                    + [{"role": "user", "content": feedback}]
                )
            attempt = Attempt(f"r{round_no}c{i + 1}", round_no, parent, messages)
            if parent is not None:
                attempt.revealed = revealed
            attempt.model = tier.source.name
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
        if self.config.select == "blind":
            # every judged candidate, not only the passing ones: a broken regression test is
            # weighed (the issue may change it), not absolute
            chosen, self.selection = blind_select.choose(
                self.attempts, self.attempts, self.critic, self.work_deadline)
            return chosen
        return selection.pick_best(passing, self.attempts)

    # ------------------------------------------------------------------ one candidate

    def _candidate(self, attempt: Attempt) -> None:
        attempt.t_start = time.monotonic()
        if self.stop.is_set() or self.budget.tokens_exhausted():
            self._finish(attempt, "cancelled", "stopped before generation")
            return
        self.progress(attempt, "generating")
        try:
            proposal = self._tier(attempt).source.propose(self._request(attempt),
                                                          self.work_deadline)
        except Exhausted:
            self._finish(attempt, "cancelled", NO_MORE)
            return
        except ContextOverflow as exc:
            if attempt.parent is None:  # the first prompt, the same for every candidate
                self._fatal(attempt, exc)
            else:
                self._finish(attempt, "error", f"generation: {exc}")
            return
        except (InfraError, UsageError) as exc:
            self._fatal(attempt, exc)
            return
        except Exception as exc:  # endpoint errors end this candidate, not the run
            if isinstance(exc, GenerationError):
                attempt.t_first_token = exc.t_first_token
                self._keep_answer(attempt, exc.partial)  # what arrived is kept, never lost
            if isinstance(exc, TimeoutError):
                self._finish(attempt, "timeout", f"generation: {exc}")
            else:
                why = one_line(exc, with_type=not isinstance(exc, GenerationError))
                self._finish(attempt, "error", f"generation failed: {why}")
            return
        completion = proposal.completion
        attempt.messages = proposal.messages
        attempt.halted_by = [h.by for h in proposal.halts]
        attempt.chars_saved = sum(h.saved for h in proposal.halts)
        for number, halt in enumerate(proposal.halts, start=1):  # the halted answers, kept
            self.log.write_attempt_file(attempt.attempt_id, f"halted-{number}.md",
                                        f"{halt.answer}\n\n---\nHalted ({halt.by}); the model "
                                        f"was told:\n\n{halt.told}\n")
        self._keep_answer(attempt, completion.text, completion)
        invalid = proposal.invalid
        if completion.stopped_early and invalid is not None:  # a stream check stopped it
            attempt.invalid_kind = invalid.kind
            self._finish(attempt, "invalid_edit", invalid.reason, feedback=invalid.told)
            return
        if self.stop.is_set() or completion.stopped_early:
            self._finish(attempt, "cancelled", "another candidate passed or the budget ran out")
            return
        if not self._make_patch(attempt, proposal):
            return
        original = self._claim_patch(attempt)
        if original is not None:
            self._copy_verdict(attempt, original)
            return
        self._verify(attempt)

    def _request(self, attempt: Attempt) -> Request:
        """What the source is asked for `attempt`; the answer so far is published on the
        attempt (the live display reads it, Ctrl-C keeps it)."""

        def live(text: str) -> None:
            attempt.streamed_chars = len(text)
            attempt.streamed = text

        return Request(self.task, attempt.attempt_id, attempt.round, attempt.parent,
                       attempt.messages, self.repo.reader_for(attempt),
                       self.repo.lister_for(attempt), self.views_for(attempt),
                       self.repo.read_base, self.verifier, self.config, self.stop, live)

    def _keep_answer(self, attempt: Attempt, text: str,
                     completion: Completion | None = None) -> None:
        """Record an answer, whole (`completion`) or the part that arrived before a failure
        (its tokens then estimated), and count its tokens; not once the attempt is finished
        (Ctrl-C finished it with what had arrived)."""
        with self._finishing:
            if attempt.status == "pending":
                self._kept_answer(attempt, text, completion)

    def _kept_answer(self, attempt: Attempt, text: str, completion: Completion | None) -> None:
        if completion is None and not text:
            return
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
        self.budget.add_tokens(attempt.prompt_tokens, attempt.completion_tokens,
                               estimated=attempt.tokens_estimated)
        self.log.write_attempt_file(attempt.attempt_id, "answer.md", text)

    def _fatal(self, attempt: Attempt, exc: InfraError | UsageError) -> None:
        """An error every candidate would meet: it ends the run. Bad input met before any
        answer (a model the endpoint does not have, a key it refuses, a first prompt over the
        window) is the run's error, not an attempt's failure: the attempt is cancelled."""
        self.fatal = self.fatal or exc
        self.stop.set()
        bad_input = isinstance(exc, UsageError) and not attempt.answer
        self._finish(attempt, "cancelled" if bad_input else "error", str(exc))

    def _make_patch(self, attempt: Attempt, proposal: Proposal) -> bool:
        read_base = self.repo.read_base
        if proposal.invalid is not None:  # its edits could not be read
            attempt.invalid_kind = proposal.invalid.kind
            self._finish(attempt, "invalid_edit", proposal.invalid.reason,
                         feedback=proposal.invalid.told)
            return False
        try:
            attempt.edit_format = proposal.edit_format
            files = {**attempt.base_files, **proposal.files}
            attempt.files = files
            attempt.patch = edits.make_patch(files, read_base)
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
        attempt.code_key = normalize.normalized_key(files, read_base)
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
        attempt.invalid_kind = original.invalid_kind
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
                    # no round learns from it
                    verdict_only=attempt.round >= self.config.rounds
                    or not _learns(self._tier(attempt).source),
                )
            attempt.verdict = verdict
            if verdict.status == "invalid_edit":
                attempt.invalid_kind = verdict.kind or "patch_rejected"
            self._finish(attempt, verdict.status, verdict.reason, feedback=verdict.feedback)
        except InfraError as exc:  # the sandbox is broken for every candidate
            self.fatal = exc
            self.stop.set()
            self._finish(attempt, "error", str(exc))
        except Exception as exc:
            self._finish(attempt, "error", f"verification failed: {one_line(exc, with_type=True)}")
            raise
        finally:
            self._sha_done[attempt.code_key].set()

    def _finish(self, attempt: Attempt, status: AttemptStatus, reason: str,
                feedback: str = "") -> None:
        """End `attempt` (once: later calls change nothing) and write its record."""
        with self._finishing:
            if attempt.status != "pending":
                return
            attempt.status = status
            attempt.reason = reason
            attempt.feedback = feedback or reason
            attempt.t_verified = time.monotonic()
            self.log.record_attempt(self._attempt_record(attempt))
        self.progress(attempt, status)

    # ------------------------------------------------------------------ next round

    # ------------------------------------------------------------------ records

    def _tier(self, attempt: Attempt) -> Tier:
        for tier in self.schedule.tiers:
            if tier.source.name == attempt.model:
                return tier
        return self.schedule.fast

    def _attempt_record(self, a: Attempt) -> AttemptRecord:
        return AttemptRecord.of(a, self.source.name, self.budget.since_start)

    def _summary(
        self, status: str, reason: str, winner: Attempt | None, rounds_used: int,
        submitted: Attempt | None = None,
    ) -> RunSummary:
        near = selection.closest(self.attempts) if winner is None else None
        other = dict(self.repro.usage()) if self.repro is not None else {}
        if self.critic is not None and self.critic.report.requests:
            calls, prompt, completion = other.get(self.critic.model.name, (0, 0, 0))
            report = self.critic.report
            other[self.critic.model.name] = (calls + report.requests,
                                             prompt + report.prompt_tokens,
                                             completion + report.completion_tokens)
        models = per_model(self.attempts, self.schedule, winner, other)
        blind = self.config.select == "blind"
        return RunSummary(
            run_id=self.log.run_id,
            task_id=self.task.id,
            status=status,
            reason=reason,
            model=self.source.name,
            samples=self.config.samples,
            rounds=self.config.rounds,
            rounds_used=rounds_used,
            select=self.config.select,
            wall_s=round(self.budget.elapsed(), 3),
            budget_s=self.config.time_budget_s,
            winner=winner.attempt_id if winner else None,
            attempts=len([a for a in self.attempts if a.status != "pending"]),
            statuses=dict(Counter(a.status for a in self.attempts)),
            halted=dict(Counter(rule for a in self.attempts for rule in a.halted_by)),
            chars_saved=sum(a.chars_saved for a in self.attempts),
            tokens=Tokens(self.budget.prompt_tokens, self.budget.completion_tokens,
                          self.budget.estimated, self.budget.counted),
            time_to_first_pass_s=self.budget.since_start(winner.t_verified) if winner else None,
            endpoint=self._endpoint(),
            sandbox=self.sandbox,
            fail_to_pass=list(self.task.fail_to_pass),
            pass_to_pass=list(self.task.pass_to_pass),
            context=self._context_record(),
            models=models,
            winner_model=winner.model if winner else None,
            escalate_to=self.schedule.strong.source.name if self.schedule.strong else None,
            escalated_at_round=self.schedule.escalated_at,
            escalation_reason=self.schedule.escalation_reason,
            cost_usd=round(sum(m["cost_usd"] for m in models.values()), 6),
            submitted=submitted.attempt_id if blind and submitted else None,
            submitted_verified_s=self.budget.since_start(submitted.t_verified)
            if blind and submitted else None,
            selection=self.selection if blind else None,
            reproduction=self.repro.summary() if blind and self.repro is not None else None,
            first=self.schedule.first.source.name if self.schedule.first else None,
            handed_over_at_round=self.schedule.handed_over_at if self.schedule.first else None,
            handover_reason=self.schedule.handover_reason,
            closest=near.attempt_id if near else None,
            closest_reason=near.reason.splitlines()[0][:300] if near and near.reason else None,
        )

    def _endpoint(self) -> dict[str, object] | None:
        """run.json's `endpoint`: what the model client learned of its endpoint."""
        model = model_of(self.source)
        return model.report() if isinstance(model, EndpointReport) else None

    def _context_record(self) -> dict[str, Any] | None:
        """What the first prompt showed of the repository, and the fast model's votes."""
        if self._context is None:
            return None
        return {
            "tokens": self._context.tokens,
            "files": [{"path": f.path, "whole": f.whole} for f in self._context.files],
            "votes": self.context_votes.record() if self.context_votes else None,
        }


def _whole_answer(attempt: Attempt) -> bool:
    """Whether `attempt` got a whole answer (or a patch from a source that writes no answer,
    such as mutation): a stream cut before its finish_reason (its text kept) is none, so an
    endpoint that cuts every stream is an infrastructure failure, not a model that could not
    fix the task."""
    return attempt.finish_reason is not None or bool(attempt.patch) or (
        bool(attempt.answer) and attempt.status not in ("error", "timeout", "cancelled"))


def _learns(source: CandidateSource) -> bool:
    """Whether `source` reads prompts and feedback; one that does not (`learns_from_feedback =
    False`: --model mutate) has each candidate start from the task, without a prompt, judged
    for its verdict only, and may say how many candidates a round has (`samples`)."""
    return bool(getattr(source, "learns_from_feedback", True))


def _no_answer_reason(attempts: list[Attempt], ended: str) -> str:
    """Why a run in which the model never produced an answer is the endpoint's failure (an
    infrastructure error), whatever ran out first: its last request's error, if any."""
    errors = [a.reason for a in attempts if a.status in ("error", "timeout") and a.reason]
    last = f"; last: {errors[-1]}" if errors else ""
    if any(a.answer for a in attempts):  # text arrived, but never a whole answer
        return f"the endpoint delivered no whole answer: every stream was cut ({ended}){last}"
    return f"the model produced no answer ({ended}){last}"
