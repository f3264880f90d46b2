"""How a run is set up: which verifier judges the loop's candidates, and when the plan is
settled on the unpatched code. One object per way (agent/app/session.py picks one):

- `Given`: the caller settled the plan and opened its verifier (`ooda ci`);
- `Settle`: the plan is settled before the loop starts (the prompt may depend on the base:
  a test command's failures become the tests that must pass), the base run beside the
  endpoint check;
- `Overlap`: the task names its tests, so the plan settles while the loop asks for the first
  answers (agent/app/basegate.py holds the candidates back until it has);
- `Blind`: the task has hidden tests and no oracle was asked for: the loop and its verifier
  see the visible task; a judge on the whole plan settles the base now and judges after the
  loop (agent/app/protocol.py).

Each one's `finish` is its protocol's: the hidden tests' verdict for `Blind`, the loop's own for
the others.
"""

from __future__ import annotations

import functools
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ooda.agent.app.basegate import GatedVerifier, overlaps
from ooda.agent.app.opening import abandon, close_opened, open_verifier, settle, timed
from ooda.agent.app.progress import RunProgress
from ooda.agent.app.protocol import (
    Protocol,
    blind_outcome,
    judge_candidates,
    judging_recorded,
    open_judge,
    plain_outcome,
    runs_blind,
)
from ooda.agent.contracts.protocols import PatchVerifier
from ooda.agent.core.loop import RunResult
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.hidden import has_hidden_tests

if TYPE_CHECKING:
    from ooda.agent.app.session import RunSession


@dataclass
class Ready:
    """A set-up's result: the plan as settled so far and what judges the candidates."""

    settled: TaskPlan
    verifier: TaskVerifier | None
    """The task verifier the loop's candidates are verified by (None while a gate settles it)."""


class Setup:
    """What every way shares (the defaults are `Settle`'s): the plan settled before the loop,
    judged as the loop judged it."""

    blind = False
    settled_by_caller = False

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.opening: Future[TaskVerifier] | None = None

    def open(self, s: RunSession) -> None:
        """Start opening the verifier (its environment, its sandboxes) in the set-up thread,
        while the model clients open."""
        self.opening = s.setup_thread.submit(
            timed, s.timeline, "environment", open_verifier, self.loop_plan(s), s.options,
            s.given.get("backend"), s.work_root, s.given.get("prestarted"), self.blind)
        s.stack.callback(close_opened, self.opening, s.work_root)

    def loop_plan(self, s: RunSession) -> TaskPlan:
        """The plan the loop's verifier is opened on."""
        return s.draft

    def ready(self, s: RunSession) -> Ready:
        """The settled plan and the verifier (blocks until they are there)."""
        opening = self.opening
        assert opening is not None
        settled, verifier = make_plan(s.draft, lambda _d: s.base_started(opening.result()))
        return Ready(settled, verifier)

    def judging(self, s: RunSession, ready: Ready, progress: RunProgress | None) -> PatchVerifier:
        """What the loop's candidates are judged by."""
        assert ready.verifier is not None
        return ready.verifier

    def after_loop(self, s: RunSession, ready: Ready, result: RunResult) -> None:
        """Once the loop ended (a gate settles the plan here)."""

    def finish(self, s: RunSession, ready: Ready, result: RunResult) -> RunResult:
        """The run's outcome by its protocol: the loop's own verdict."""
        return plain_outcome(result, self.protocol, has_hidden_tests(ready.settled.task),
                             s.recorder)


class Settle(Setup):
    """The plan is settled before the loop starts (the prompt may depend on the base), in the
    set-up thread from as soon as the verifier is open: the base runs while the model
    clients open and the endpoint is checked, not after (issue 40 #13)."""

    def open(self, s: RunSession) -> None:
        super().open(s)
        assert self.opening is not None
        self.settling = s.setup_thread.submit(settle, s.draft, self.opening, s.timeline)
        s.stack.callback(abandon, self.settling)

    def ready(self, s: RunSession) -> Ready:
        settled, verifier = self.settling.result()
        return Ready(settled, verifier)


class Given(Setup):
    """The caller settled the plan and opened its verifier (and closes it)."""

    settled_by_caller = True

    def __init__(self, protocol: Protocol, verifier: TaskVerifier) -> None:
        super().__init__(protocol)
        self.verifier = verifier

    def open(self, s: RunSession) -> None:
        pass

    def ready(self, s: RunSession) -> Ready:
        return Ready(s.draft, self.verifier)


class Overlap(Setup):
    """The plan settles while the loop asks for the first answers; candidates wait at the
    gate until it has (a failed base check discards them)."""

    def ready(self, s: RunSession) -> Ready:
        opening = self.opening
        assert opening is not None
        self.settling = s.setup_thread.submit(settle, s.draft, opening, s.timeline)
        s.stack.callback(abandon, self.settling)
        return Ready(s.draft, None)

    def judging(self, s: RunSession, ready: Ready, progress: RunProgress | None) -> PatchVerifier:
        self.gate = GatedVerifier(self.settling,
                                  on_failure=progress.discard if progress is not None else None)
        if progress is not None:  # its rows wait for the base check
            progress.hold()
            self.settling.add_done_callback(functools.partial(_shown_or_dropped, progress))
        return self.gate

    def after_loop(self, s: RunSession, ready: Ready, result: RunResult) -> None:
        """Even when no candidate got as far as its judging, the plan is settled now."""
        ready.settled, ready.verifier = self.gate.settled()
        result.summary = replace(result.summary, sandbox=ready.verifier.backend.name)


class Blind(Setup):
    """The loop sees the visible task; the hidden tests judge the base now and the submitted
    patch (and, for coverage, the others) after the loop."""

    blind = True

    def loop_plan(self, s: RunSession) -> TaskPlan:
        return s.draft.visible()

    def ready(self, s: RunSession) -> Ready:
        opening = self.opening
        assert opening is not None
        loops = opening.result()
        settled, self.judge = make_plan(s.draft, lambda whole: s.base_started(timed(
            s.timeline, "environment", open_judge, whole, loops,
            s.options.sandbox.retry_failed_environments)))
        s.stack.callback(self.judge.close)
        return Ready(settled, loops)

    def finish(self, s: RunSession, ready: Ready, result: RunResult) -> RunResult:
        """The hidden tests' verdict on the submitted patch."""
        verifier = ready.verifier
        assert verifier is not None
        with judging_recorded(result, s.recorder), s.timeline.span("verification"):
            judgement = judge_candidates(self.judge, result, s.log,
                                         s.loop_options.verify_concurrency,
                                         not s.loop_options.judge_submitted)
        return blind_outcome(result, judgement, s.recorder,
                             verifier.blind.record() if verifier.blind else None)


def choose(s: RunSession, protocol: Protocol) -> Setup:
    """The set-up of the run `s`."""
    verifier = s.given.get("verifier")
    if verifier is not None:
        return Given(protocol, verifier)
    if runs_blind(s.task, protocol):
        return Blind(protocol)
    return Overlap(protocol) if overlaps(s.draft) else Settle(protocol)


def _shown_or_dropped(progress: RunProgress, settling: Future[Any]) -> None:
    """The candidates' rows held back while the plan settled: shown, or (the base check
    failed: its one error line says it all) dropped."""
    if not settling.cancelled() and settling.exception() is None:
        progress.release()
    else:
        progress.discard()


