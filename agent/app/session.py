"""One run of one task, in order: its plan drafted and said, its set-up (agent/app/setups.py:
the verifier opened in a set-up thread while the model clients open, the plan settled on the
unpatched code), the loop, the protocol's finish, and run.json written once.

`ooda run`, `ooda eval` (and its Ray nodes) and `ooda ci` all run a task this way, through
`run_task` (agent/app/run.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict, TypeVar

from rich.console import Console

from ooda.agent.app import setups
from ooda.agent.app.basegate import BaseCheckFailed
from ooda.agent.app.opening import Prestarted, schedule_for
from ooda.agent.app.options import RunOptions
from ooda.agent.app.progress import RunProgress
from ooda.agent.app.protocol import protocol_for
from ooda.agent.app.source import open_source
from ooda.agent.context import warm
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import EndpointReport, Model, SandboxBackend
from ooda.agent.core.loop import INTERRUPTED, Loop, RunResult
from ooda.agent.core.records import Attempt, RunSummary
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog, SummaryRecorder, new_run_id
from ooda.agent.core.sources import CandidateSource, as_source, model_of, source_kind
from ooda.agent.models import open_model
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.support.phases import Timeline
from ooda.agent.support.text import one_line
from ooda.agent.support.textsafe import markup_safe
from ooda.agent.verify.base import plan_line
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task
from ooda.verifiers.issue_probes import issue_probe

if TYPE_CHECKING:
    from collections.abc import Iterable

T = TypeVar("T")


class RunGiven(TypedDict, total=False):
    """What a caller may hand a run besides the task and its options."""

    console: Console | None
    """Where to say what happens (None: nothing is said)."""
    show_progress: bool
    """Say it (the plan's environment line, the live display); default True."""
    model: Model | CandidateSource | None
    """A model or source shared between tasks (`ooda eval`); None: opened from the options."""
    strong: Model | None
    """The model to escalate to, shared like `model`; None: opened from the options."""
    backend: SandboxBackend | None
    """A sandbox backend shared between tasks; None: opened here, closed at the end."""
    run_id: str | None
    """The run directory's name under `options.runs_dir` (default: fresh, time-stamped)."""
    prestarted: Prestarted | None
    """What start-up began for this command (a backend, a container), taken when it fits."""
    plan: TaskPlan | None
    """A plan the caller drafted (and said) already."""
    verifier: TaskVerifier | None
    """The verifier of a plan the caller settled too (`ooda ci`; the caller closes it)."""
    timeline: Timeline | None
    """Where the command's seconds went before (run.json's `phases` start from it)."""
    teardown: Callable[[Callable[[], None]], None] | None
    """Given the closing of what the run opened once its result is complete, to run it when
    the command's output is out (`ooda run`); None: closed before returning."""


class RunSession:
    """One run of one task (`run` once)."""

    def __init__(self, task: Task, options: RunOptions, given: RunGiven) -> None:
        self.task = task
        self.options = options.checked()
        self.given = given
        console = given.get("console")
        self.console = console if given.get("show_progress", True) else None
        self.timeline = given.get("timeline") or Timeline(start=time.monotonic())
        self.kind = source_kind(self.options.model.name)
        self.loop_options = self.kind.loop_options(self.options.loop)
        first = self.options.escalation.first
        self.first_kind = source_kind(first) if first else None
        """The source tried before the model (`--first`, `--model mutate,FAST`)."""
        if self.first_kind is not None:  # its rounds (the budget ends them) before the model's
            self.loop_options = dataclasses.replace(
                self.loop_options, rounds=self.first_kind.loop_options(self.loop_options).rounds)
        self.draft: TaskPlan
        self.log: RunLog
        self.recorder: SummaryRecorder
        self.stack: contextlib.ExitStack
        self.setup_thread: ThreadPoolExecutor
        self.work_root: Path
        self._base_started: list[float] = []
        self._warming: subprocess.Popen[bytes] | None = None

    def run(self) -> tuple[RunResult, RunLog]:
        """plan → set-up → loop → the protocol's finish → run.json."""
        self.draft = self._draft()
        setup = setups.choose(self, protocol_for(self.loop_options.oracle,
                                                 self.options.model.name))
        if setup.blind:  # the loop and its verifier see the visible task; the whole one judges
            self.loop_options = dataclasses.replace(self.loop_options, select="blind")
        self.log = RunLog(self.options.runs_dir,
                          self.given.get("run_id") or new_run_id(self.task.id))
        self.recorder = SummaryRecorder(self.log, hold=True)
        with contextlib.ExitStack() as self.stack:
            ready, source, strong = self._set_up(setup)
            result = self._loop(setup, ready, source, strong)
            result = setup.finish(self, ready, result)
            writing = time.monotonic()
            result.summary = self._plan_facts(result.summary, ready)
            teardown = self.given.get("teardown")
            if teardown is not None:  # the result is complete: closing is left to the caller
                teardown(self.stack.pop_all().close)
        return self._record(result, writing), self.log

    # ------------------------------------------------------------------ the plan

    def _draft(self) -> TaskPlan:
        """The task's plan as drafted here, or by the caller; its environment line said."""
        given = self.given.get("plan")
        if given is not None:
            return given
        with self.timeline.span("task"):
            draft = draft_plan(self.task, self.options.environment, self.options.sandbox,
                               self.options.stages, time_budget_s=self.loop_options.time_budget_s)
        if draft.environment_line:
            self.say(draft.environment_line)
        return draft

    # ------------------------------------------------------------------ set-up

    def _set_up(self, setup: setups.Setup) -> tuple[setups.Ready, CandidateSource, Model | None]:
        """The verifier opened and the plan settled while the model clients open; an
        infrastructure failure meanwhile leaves a run.json saying so."""
        with self._setup_failures_recorded(), self._announce(setup):
            # (a set-up still opening when the run ends may be writing into it: close_opened)
            self.work_root = Path(self.stack.enter_context(tempfile.TemporaryDirectory(
                prefix="ooda-", ignore_cleanup_errors=True)))
            self.setup_thread = ThreadPoolExecutor(1, thread_name_prefix="ooda-setup")
            # a set-up left running is abandoned
            self.stack.callback(self.setup_thread.shutdown, wait=False)
            setup.open(self)
            self._warm_index()  # beside the endpoint check, the sandboxes and the base run
            with self.timeline.span("generation"):  # the model clients: the endpoint check
                source, strong = self._open_answerers()
            ready = setup.ready(self)
            if self._base_started:
                self.timeline.until_now("base_check", since=self._base_started[0])
            with self.timeline.span("task"):  # the first prompt's index, if still building
                warm.finish(self._warming)
        self.say_passing_before(ready.settled)
        self.say_plan(ready.settled)
        return ready, source, strong

    def _open_answerers(self) -> tuple[CandidateSource, Model | None]:
        model = self.given.get("model")
        if model is None:
            model = self.stack.enter_context(open_source(self.options.model, self.task))
        strong = self.given.get("strong")
        strong_options = self.options.escalation_model()
        if strong is None and strong_options is not None:
            strong = self.stack.enter_context(open_model(
                strong_options, self.task, api_key=self.options.escalation.api_key()))
        return as_source(model), strong

    def base_started(self, value: T) -> T:
        """`value`, noting when it came (the base check starts then)."""
        self._base_started.append(time.monotonic())
        self._warm_index()
        return value

    def _warm_index(self) -> None:
        """Start building the first prompt's context index in a process of its own
        (agent/context/warm.py), once, when the run asks a model: from the set-up's start,
        so that neither the endpoint check nor the base run is waited for first."""
        if self.kind.asks_endpoint and self._warming is None:
            self._warming = warm.start(self.task.repo, self.task)
            self.stack.callback(warm.stop, self._warming)

    @contextlib.contextmanager
    def _announce(self, setup: setups.Setup) -> Iterator[None]:
        """The seconds before the first answer say what they go to (a transient line, in a
        terminal only: piped output and bad input's one error line stay as they are)."""
        if self.console is None or not self.console.is_terminal:
            yield
            return
        line = _base_run_line(self.draft, self.kind.asks_endpoint,
                              settled=setup.settled_by_caller)
        with self.console.status(markup_safe(line)):
            yield

    @contextlib.contextmanager
    def _setup_failures_recorded(self) -> Iterator[None]:
        """Before the loop starts (sandboxes, environment, the base check): an infrastructure
        failure leaves a run.json saying so; bad input leaves no run directory at all."""
        try:
            yield
        except UsageError:
            remove_workspace(self.log.dir)
            raise
        except (InfraError, KeyboardInterrupt) as exc:
            reason = one_line(exc) if isinstance(exc, InfraError) else INTERRUPTED
            with contextlib.suppress(InfraError):
                self.recorder.now(RunSummary.error(self.log.run_id, self.task.id, reason))
            raise

    # ------------------------------------------------------------------ the loop

    def _loop(self, setup: setups.Setup, ready: setups.Ready, source: CandidateSource,
              strong: Model | None) -> RunResult:
        # what the loop sees: the visible task of a blind run; the tests the task names
        task = ready.verifier.task if ready.verifier is not None else ready.settled.judged_task()
        asked = model_of(source)  # the model the source asks, if it asks one
        if self.console is not None and asked is not None:
            say_notices(asked, self.console)
        progress = (RunProgress(task.id, self.loop_options.time_budget_s,
                                self.loop_options.rounds, self.console,
                                (self.options.model.price_prompt,
                                 self.options.model.price_completion))
                    if self.console is not None else None)
        writer = (ReproWriter(task, asked, ready.verifier, self.loop_options.repro_tests,
                              self.log.dir / "reproduction",
                              functools.partial(issue_probe, task.statement, task.repo))
                  if setup.blind and ready.verifier is not None and asked is not None else None)
        kind = self.first_kind
        first = kind.open(task) if kind is not None and kind.open is not None else None
        loop = Loop(task, source, setup.judging(self, ready, progress), self.log,
                    self.loop_options, progress,
                    schedule_for(self.options, source, strong, first), writer)
        loop.sandbox = ready.verifier.backend.name if ready.verifier is not None else None
        loop.recorder = self.recorder
        with progress or contextlib.nullcontext():
            result = self._run_loop(loop, progress)
        setup.after_loop(self, ready, result)
        if isinstance(setup, setups.Overlap):  # the plan settled while the loop ran
            self.say_plan(ready.settled)
            self.say_passing_before(ready.settled)
        return result

    def _run_loop(self, loop: Loop, progress: RunProgress | None) -> RunResult:
        try:
            # on Ctrl-C the loop leaves a run.json agreeing with its attempts
            with self.timeline.span("selection"):  # the loop's own work, where nothing else runs
                return loop.run()
        except KeyboardInterrupt:
            raise KeyboardInterrupt(str(self.log.dir)) from None
        except BaseCheckFailed as failed:
            self._discarded(loop, failed)
            raise failed.cause from None
        except UsageError:  # bad input every request met before any answer (a model the
            # endpoint lacks, a first prompt over its window): its one line says it all
            if progress is not None and not any(a.answer for a in loop.attempts):
                progress.discard()
            raise
        finally:
            attempt_phases(self.timeline, loop.attempts)

    def _discarded(self, loop: Loop, failed: BaseCheckFailed) -> None:
        """run.json of a run whose base check failed while the model answered."""
        answers = sum(1 for a in loop.attempts if a.answer)
        reason = (f"{failed.reason()}; the {answers} answer(s) received meanwhile were "
                  "discarded" if answers else failed.reason())
        with contextlib.suppress(Exception):  # the error itself is what the user must see
            rounds = max((a.round for a in loop.attempts), default=0)
            self.recorder.now(loop.summary("error", reason, None, rounds))

    # ------------------------------------------------------------------ the record

    def _plan_facts(self, summary: RunSummary, ready: setups.Ready) -> RunSummary:
        """What the loop's run.json cannot know: the environment line, the FAIL_TO_PASS tests
        that pass on the unpatched code already, the earlier base check it used."""
        said = self.draft.environment_line
        passing = _passing_before(ready.settled)
        kept = ready.settled.base.kept_from if ready.settled.base is not None else None
        if not said and not passing and kept is None:
            return summary
        return dataclasses.replace(summary, environment=said,
                                   fail_to_pass_passing_before=passing, base_kept_from=kept)

    def _record(self, result: RunResult, writing: float) -> RunResult:
        """run.json, once, with where the command's seconds went (the sandboxes are closed,
        or left to the caller's teardown)."""
        self.timeline.until_now("writing", since=writing)
        end = time.monotonic()
        result.summary = dataclasses.replace(
            result.summary, phases=self.timeline.split(end),
            command_wall_s=round(end - self.timeline.start, 3))
        self.recorder.now(result.summary)
        return result

    # ------------------------------------------------------------------ what is said

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(markup_safe(text), highlight=False)

    def say_plan(self, settled: TaskPlan) -> None:
        """The tests a fix must pass, what was set apart, the limit (once the base ran)."""
        line = plan_line(settled)
        if line:
            self.say(line)

    def say_passing_before(self, settled: TaskPlan) -> None:
        passing = _passing_before(settled)
        if passing:
            more = f" and {len(passing) - 1} more" if len(passing) > 1 else ""
            self.say(f"warning: FAIL_TO_PASS {passing[0]}{more} pass(es) on the unpatched "
                     "code already: these tests cannot tell a fix from no change")


def _passing_before(plan: TaskPlan) -> list[str]:
    return list(plan.base.fail_to_pass_passing) if plan.base else []


def attempt_phases(timeline: Timeline, attempts: Iterable[Attempt]) -> None:
    """Each attempt's generation (request to last token) and verification (last token to
    verdict, its wait for a verification slot included) as spans of `timeline`."""
    for attempt in attempts:
        if attempt.t_start is not None and attempt.t_generated is not None:
            timeline.add("generation", attempt.t_start, attempt.t_generated)
            if attempt.t_verified is not None:
                timeline.add("verification", attempt.t_generated, attempt.t_verified)


def say_notices(model: Model, console: Console) -> None:
    """Print what the model client adapts to (requests at once, the context window) as it
    happens, one `note:` line each."""
    if isinstance(model, EndpointReport) and model.on_notice is None:
        model.on_notice = lambda text: console.print(f"[yellow]note:[/yellow] {markup_safe(text)}",
                                                     highlight=False)


def _base_run_line(plan: TaskPlan, endpoint: bool, *, settled: bool) -> str:
    """What runs before the first model call: the endpoint (if the source asks one) is checked
    while the sandbox starts, then (unless the caller settled the plan already) the plan's
    tests run on the unpatched code."""
    first = "checking the endpoint, starting a sandbox" if endpoint else "starting a sandbox"
    if settled:
        return first
    tests = plan.tests
    if tests.fail_to_pass:
        what = (f"{len(tests.fail_to_pass)} must fail"
                + (f", {len(tests.pass_to_pass)} must pass" if tests.pass_to_pass else ""))
    else:
        what = f"`{tests.test_cmd or plan.runner_cmd or 'python -m pytest -q'}`"
    return f"{first}; then the tests on the unpatched code ({what})"
