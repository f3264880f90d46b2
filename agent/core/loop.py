"""The best-of-N loop: sample candidates in parallel, verify each, feed failures back.

One round starts `samples` candidates at once on a thread pool. Each candidate is asked of the
round's source, made a patch, de-duplicated and verified in the sandbox as soon as its answer
ends (agent/core/candidate.py). The next round's candidates continue from the failed ones of the
round before (their patch plus what failed: agent/core/conversation.py). The run stops at the
first passing candidate (`select="first"`), or picks among a round's passing ones
(`select="best"`, `"blind"`), or when the rounds, the tokens or the wall-clock budget run out;
agent/core/summary.py says how it ended.

Which source answers a round is the schedule's choice (agent/core/schedule.py): one model, or a
fast one escalating to a strong one, which then starts from the task and a digest of the fast
model's best failures.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from ooda.agent.context import Context
from ooda.agent.contracts.options import LoopOptions
from ooda.agent.contracts.protocols import Model, PatchVerifier
from ooda.agent.core import blind_select, selection
from ooda.agent.core.budget import Budget
from ooda.agent.core.candidate import NO_MORE, CandidateContext, Candidates
from ooda.agent.core.conversation import Conversation
from ooda.agent.core.critic import Critic
from ooda.agent.core.records import (
    Attempt,
    AttemptStatus,
    ProgressHook,
    RunResult,
    RunSummary,
)
from ooda.agent.core.repo_view import RepoView
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog, SummaryRecorder
from ooda.agent.core.schedule import ModelSchedule, Tier, digest
from ooda.agent.core.sources import CandidateSource, as_source, learns, model_of
from ooda.agent.core.summary import ending, summarize
from ooda.agent.edits import Views
from ooda.tasks.loader import Task

__all__ = ["INTERRUPTED", "NO_MORE", "Attempt", "AttemptStatus", "Loop", "LoopOptions",
           "ProgressHook", "RunResult"]
"""The records are re-exported: callers take Loop, its options and its results from here."""
INTERRUPTED = "interrupted (Ctrl-C)"
"""The reason run.json and the attempts under way give when the user pressed Ctrl-C."""


@dataclass
class _Rounds:
    """How the rounds went: the winner, why they ended, how many ran."""

    winner: Attempt | None = None
    reason: str = "no candidate passed"
    used: int = 0


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
    ) -> None:
        """`model` (a model, asked through the LLM source, or any candidate source) answers
        every round, unless `schedule` (whose fast tier it should be) says which source answers
        each round. `repro`: a blind run's reproduction-test writer,
        started with the first round (its tokens count in the budget)."""
        self.task = task
        self.source = as_source(model)
        self.schedule = schedule or ModelSchedule.single(self.source)
        self.verifier = verifier
        self.sandbox: str | None = None
        self.recorder = SummaryRecorder(log)
        """Where run.json goes: written when the loop ends, unless its owner holds it (the run
        session writes it once, at the run's end)."""
        """The name of the backend `verifier` runs candidates on (run.json's `sandbox`)."""
        self.log = log
        self.config = config
        self.progress = progress or (lambda attempt, state: None)
        self.budget = Budget(config.time_budget_s, config.token_budget)
        # Leave time to tear sandboxes down before the hard deadline.
        self.work_deadline = self.budget.deadline - min(2.0, 0.05 * config.time_budget_s)
        self.stop = threading.Event()
        self.attempts: list[Attempt] = []
        self.conversation = Conversation(task, config, model_of(self.schedule.fast.source),
                                         self.budget, self.work_deadline)
        self.candidates = Candidates(CandidateContext(
            task, verifier, log, config, self.budget, self.work_deadline, self.stop,
            self.progress, RepoView(task.repo), self.conversation.views_for,
            lambda attempt: self._tier(attempt).source, self.source.name))
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
        """The code the first prompt shows (agent/core/conversation.py)."""
        return self.conversation.context

    def context_tokens(self) -> int:
        """The first prompt's code budget, fitted to the fast model's window."""
        return self.conversation.context_tokens()

    def views_for(self, attempt: Attempt) -> Views:
        return self.conversation.views_for(attempt)

    # ------------------------------------------------------------------ the loop

    def run(self) -> RunResult:
        """Run rounds until a candidate passes or a budget runs out."""
        pool = ThreadPoolExecutor(max_workers=max(1, self.config.samples))
        if self.repro is not None:
            self.repro.start(self.budget, self.work_deadline, self.stop)
        rounds = _Rounds()
        try:
            self._rounds(pool, rounds)
        except BaseException as exc:
            # Ctrl-C (or a bug): candidates wind down, but no one waits for a request that hangs
            self.stop.set()
            pool.shutdown(wait=False, cancel_futures=True)
            if isinstance(exc, KeyboardInterrupt):
                self._interrupted(rounds.used)
            raise
        pool.shutdown(wait=True)
        return self._conclude(rounds)

    def _rounds(self, pool: ThreadPoolExecutor, rounds: _Rounds) -> None:
        parents: list[Attempt | None] = [None]
        for round_no in range(1, self.config.rounds + 1):
            ended = self._out_of_budget()
            if ended:
                rounds.reason = ended
                return
            rounds.used = round_no
            batch = self._plan_round(round_no, parents)
            rounds.winner = self._run_round(pool, batch)
            if rounds.winner is not None or self.candidates.fatal is not None:
                return
            if all(a.reason == NO_MORE for a in batch) and not self._next_source():
                why = next((a.feedback for a in batch if a.feedback != NO_MORE), "")
                rounds.reason = f"{NO_MORE} ({why})" if why else NO_MORE
                return
            if self.stop.is_set() and time.monotonic() >= self.work_deadline:
                rounds.reason = "budget"
                return
            parents = selection.pick_parents(batch)
        rounds.reason = "rounds exhausted"

    def _out_of_budget(self) -> str | None:
        """"budget" or "tokens" once one is spent."""
        if self.budget.expired() or time.monotonic() >= self.work_deadline:
            return "budget"
        return "tokens" if self.budget.tokens_exhausted() else None

    def _next_source(self) -> bool:
        """The round's source has no more candidates: a later tier answers next (False: there
        is none to go on with)."""
        return self.schedule.exhausted()

    def _conclude(self, rounds: _Rounds) -> RunResult:
        """The run's result and run.json, once the rounds are over."""
        winner = submitted = rounds.winner
        if self.config.select == "blind" and winner is None:
            submitted, self.selection = blind_select.choose(
                self.attempts, self.attempts, self.critic, self.work_deadline)
        if self.repro is not None:
            self.repro.join(timeout_s=max(1.0, self.budget.remaining()))
        fatal = self.candidates.fatal
        status, reason = ending(self.attempts, winner, rounds.reason,
                                budget_spent=self.budget.expired(), fatal=fatal)
        if winner is not None and self.config.select != "blind":
            self.log.write_final_diff(winner.patch)  # a blind run's judge writes it, if resolved
        summary = self.summary(status, reason, winner, rounds.used, submitted)
        if fatal is not None:  # the run ends on an error: its run.json cannot wait
            self.recorder.now(summary)
            raise fatal
        self.recorder.record(summary)
        return RunResult(status, reason, winner, list(self.attempts), rounds.used, summary,
                         submitted)

    @property
    def fatal(self) -> Exception | None:
        """The error every candidate would meet that ended the run, if one did."""
        return self.candidates.fatal

    def _interrupted(self, rounds_used: int) -> None:
        """Ctrl-C: every attempt still under way ends now, "cancelled", with the part of its
        answer that had arrived kept; then the run's summary, which agrees with
        attempts.jsonl."""
        with contextlib.suppress(Exception):  # best effort: the user is waiting
            self.candidates.interrupted(list(self.attempts), INTERRUPTED)
            self.recorder.now(self.summary("error", INTERRUPTED, None, rounds_used))

    def _budget_left(self) -> float:
        """The fraction of the budget left: the smaller of time and tokens."""
        left = self.budget.remaining() / self.config.time_budget_s
        if self.config.token_budget:
            used = self.budget.prompt_tokens + self.budget.completion_tokens
            left = min(left, 1 - used / self.config.token_budget)
        return left

    def _plan_round(self, round_no: int, parents: list[Attempt | None]) -> list[Attempt]:
        tier = self.schedule.tier_for(round_no, self.config.rounds, self._budget_left())
        escalating = self.schedule.starts_afresh(round_no)
        told = ""
        if escalating:  # the tier before's best failures (from any round: the last may have
            # had none, a source with nothing left)
            told = digest([p for p in parents if p is not None] or [
                a for a in selection.pick_parents(self.attempts) if a is not None])
        reads = learns(tier.source)
        if escalating or not reads:
            parents = [None]  # the strong model starts from the task, told of the failures
        siblings = selection.sibling_digest(parents) if self.config.sibling_digest else []
        batch = []
        for i in range(getattr(tier.source, "samples", None) or self.config.samples):
            parent = parents[i % len(parents)]
            attempt = Attempt(f"r{round_no}c{i + 1}", round_no, parent, [])
            if reads:  # a source that reads no prompt (--model mutate) is given none
                opening = self.conversation.opening(parent, told, siblings)
                attempt.messages, attempt.revealed = opening.messages, opening.revealed
            attempt.model = tier.source.name
            batch.append(attempt)
        self.attempts += batch
        return batch

    def _run_round(self, pool: ThreadPoolExecutor, batch: list[Attempt]) -> Attempt | None:
        futures: dict[Future[None], Attempt] = {
            pool.submit(self.candidates.run, a): a for a in batch}
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
                    self.candidates.finish(attempt, "error",
                                           f"internal error: {fut.exception()}")
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

    def _tier(self, attempt: Attempt) -> Tier:
        for tier in self.schedule.tiers:
            if tier.source.name == attempt.model:
                return tier
        return self.schedule.fast

    def summary(self, status: str, reason: str, winner: Attempt | None, rounds_used: int,
                submitted: Attempt | None = None) -> RunSummary:
        """run.json's summary of the run as it stands (agent/core/summary.py)."""
        return summarize(self, status, reason, winner, rounds_used, submitted)
