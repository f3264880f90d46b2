"""Run one task end to end: pick the model and sandbox, set up the run directory, run the loop.

Shared by `ooda run`, `ooda eval` and `ooda ci`; their options are RunOptions
(agent/app/options.py), re-exported here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from rich.console import Console

from ooda.agent.app.basegate import BaseCheckFailed, GatedVerifier, overlaps
from ooda.agent.app.options import RunOptions
from ooda.agent.app.progress import RunProgress
from ooda.agent.app.protocol import (
    blind_outcome,
    judge_candidates,
    judging_recorded,
    open_judge,
    plain_outcome,
    protocol_for,
    runs_blind,
)
from ooda.agent.app.source import open_source
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import (
    EndpointReport,
    Model,
    PatchVerifier,
    SandboxBackend,
)
from ooda.agent.core.loop import INTERRUPTED, Loop, RunResult
from ooda.agent.core.records import Attempt, RunSummary
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog, new_run_id
from ooda.agent.core.schedule import ModelSchedule, Price, Tier
from ooda.agent.core.sources import CandidateSource, LLMSource, as_source, model_of, source_kind
from ooda.agent.models import open_model
from ooda.agent.sandbox.registry import open_backend
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.support.phases import Timeline
from ooda.agent.support.text import one_line
from ooda.agent.support.textsafe import markup_safe
from ooda.agent.verify.base import plan_line
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.hidden import has_hidden_tests
from ooda.tasks.loader import Task

if TYPE_CHECKING:
    from ooda.agent.sandbox.docker.launch import Launched

__all__ = ["Prestarted", "RunOptions", "open_verifier", "prepare_task", "run_task"]

T = TypeVar("T")


class Prestarted(Protocol):
    """What start-up (agent/startup/prestart.py) began for this command before its options
    were parsed; the run takes what fits its options and leaves the rest to close itself."""

    leftovers_cleaned: bool
    """Dead invocations' containers are removed elsewhere (the daemon does it between
    commands): opening a backend skips that."""

    def take_backend(self, name: str | None) -> SandboxBackend | None:
        """The backend begun for the sandbox `name`, if that is the one begun, else None."""
        ...

    def take_launch(self) -> tuple[Path, Launched] | None:
        """(its work directory, a started sandbox container) while one is left untaken (the
        daemon may have started two), else None."""
        ...


def schedule_for(options: RunOptions, source: CandidateSource,
                 strong: Model | None, first: CandidateSource | None = None) -> ModelSchedule:
    """The run's sources in escalation order, with their prices (`first`: the source tried
    before the model, `--first`; the fast tier's rounds then default to the user's)."""
    given = options.model
    fast = Tier(source, Price(given.price_prompt or 0.0, given.price_completion or 0.0))
    esc = options.escalation
    first_tier = Tier(first, role="first") if first is not None else None
    after = esc.escalate_after
    if first is not None and after is None:
        after = max(options.loop.rounds - 1, 1)
    return ModelSchedule(
        fast,
        Tier(LLMSource(strong), Price(esc.escalate_price_prompt or 0.0,
                           esc.escalate_price_completion or 0.0), "strong")
        if strong is not None else None,
        after_rounds=after,
        budget_below=esc.escalate_below,
        first=first_tier,
    )


def run_task(
    task: Task,
    options: RunOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    model: Model | CandidateSource | None = None,
    backend: SandboxBackend | None = None,
    run_id: str | None = None,
    prestarted: Prestarted | None = None,
    strong: Model | None = None,
    plan: TaskPlan | None = None,
    verifier: TaskVerifier | None = None,
    timeline: Timeline | None = None,
    teardown: Callable[[Callable[[], None]], None] | None = None,
) -> tuple[RunResult, RunLog]:
    """Run the loop on one task and return its result and run directory.

    The task's plan (agent/verify/plan.py: environment, runner, stages, tests, the facts of
    the unpatched code) is made here as every command makes it (`make_plan`). A caller that
    drafted it already, and said its environment line, passes the draft as `plan`; one that
    settled it too passes its `verifier` as well (`ooda ci`, which wrote the statement from the
    base's failures; that caller closes the verifier).

    `model` (a model or any candidate source) and `backend` may be shared between tasks
    (`ooda eval`); otherwise they are made here from `options` and released at the end. `run_id` names the run directory under
    `options.runs_dir` (default: a fresh, time-stamped id). `prestarted`: what start-up began
    for this command (a backend, a container), taken when it fits. `strong`: the model to
    escalate to, when shared like `model` (otherwise opened here from `options.escalate_to`).
    `timeline`: where the command's seconds went before (start-up, loading the task); run.json's
    `phases` split the command's wall time from its start (default: from this call).
    `teardown`: given the closing of what the run opened (sandboxes, model clients, the work
    directory) once its result is complete, to run it when the command's output is out
    (`ooda run`: agent/support/exits.after_output); None: closed here, before returning.
    """
    options = options.checked()
    timeline = timeline if timeline is not None else Timeline(start=time.monotonic())
    with timeline.span("task"):
        draft = plan if plan is not None else draft_plan(task, options.environment,
                                                         options.sandbox, options.stages)
    said = draft.environment_line
    if said and plan is None and show_progress and console is not None:
        console.print(markup_safe(said), highlight=False)
    kind = source_kind(options.model.name)
    loop_options = kind.loop_options(options.loop)
    first_kind = source_kind(options.escalation.first) if options.escalation.first else None
    if first_kind is not None:  # its rounds (the budget ends them) before the model's
        loop_options = dataclasses.replace(
            loop_options, rounds=first_kind.loop_options(loop_options).rounds)
    protocol = protocol_for(loop_options.oracle, options.model.name)
    blind = verifier is None and runs_blind(task, protocol)
    if blind:  # the loop and its verifier see the visible task only; the whole one judges
        loop_options = dataclasses.replace(loop_options, select="blind")
    log = RunLog(options.runs_dir, run_id or new_run_id(task.id))
    with contextlib.ExitStack() as stack:
        # the seconds before the first answer say what they go to (a transient line, in a
        # terminal only: piped output and bad input's one error line stay as they are)
        announce = (console.status(markup_safe(_base_run_line(
                        draft, kind.asks_endpoint, settled=verifier is not None)))
                    if show_progress and console is not None and console.is_terminal
                    else contextlib.nullcontext())
        with _setup_failures_recorded(log, task.id), announce:
            # (a set-up still opening when the run ends may be writing into it: _close_opened)
            work_root = Path(stack.enter_context(tempfile.TemporaryDirectory(
                prefix="ooda-", ignore_cleanup_errors=True)))
            # Sandboxes start (the environment is built, the base's baselines run) while the
            # model client is set up. The plan is settled on the unpatched code before any
            # candidate is judged: before the loop starts, or (the task names its tests, so the
            # prompt does not depend on the base) while the loop asks for the first answers
            # (agent/app/basegate.py).
            setup = ThreadPoolExecutor(1, thread_name_prefix="ooda-setup")
            stack.callback(setup.shutdown, wait=False)  # a set-up left running is abandoned
            if verifier is None:
                opening = setup.submit(_timed, timeline, "environment", open_verifier,
                                       draft.visible() if blind else draft, options,
                                       backend, work_root, prestarted, blind)
                stack.callback(_close_opened, opening, work_root)
            with timeline.span("generation"):  # the model clients: the endpoint check
                if model is None:
                    model = stack.enter_context(open_source(options.model, task))
                strong_options = options.escalation_model()
                if strong is None and strong_options is not None:
                    strong = stack.enter_context(open_model(
                        strong_options, task, api_key=options.escalation.api_key()))
            judge = None
            gate: GatedVerifier | None = None
            base_started: list[float] = []  # once the environment is there
            if verifier is not None:  # settled by the caller
                settled = draft
            elif blind:  # the hidden tests judge the base now and candidates at the end
                loops = verifier = opening.result()
                settled, judge = make_plan(draft, lambda whole: _started(
                    base_started, _timed(timeline, "environment", open_judge, whole,
                                         loops, options.sandbox.retry_failed_environments)))
                stack.callback(judge.close)
            elif overlaps(draft):
                settling = setup.submit(_settle, draft, opening, timeline)
                stack.callback(_abandon, settling)
                gate, settled = GatedVerifier(settling), draft
            else:
                settled, verifier = make_plan(
                    draft, lambda _draft: _started(base_started, opening.result()))
            if base_started:
                timeline.until_now("base_check", since=base_started[0])
        passing_before = list(settled.base.fail_to_pass_passing) if settled.base else []
        # what the loop sees: the visible task of a blind run; the tests the task names
        task = verifier.task if verifier is not None else settled.judged_task()
        if passing_before and show_progress and console is not None:
            console.print(markup_safe(_passing_before_line(passing_before)), highlight=False)
        if show_progress and console is not None and (line := plan_line(settled)):
            console.print(markup_safe(line), highlight=False)
        source = as_source(model)
        asked = model_of(source)  # the model the source asks, if it asks one
        if show_progress and console is not None and asked is not None:
            say_notices(asked, console)
        first = first_kind.open(task) if first_kind is not None and first_kind.open else None
        schedule = schedule_for(options, source, strong, first)
        progress = (RunProgress(task.id, loop_options.time_budget_s, loop_options.rounds,
                                console, (options.model.price_prompt,
                                          options.model.price_completion))
                    if show_progress and console is not None else None)
        writer = (ReproWriter(task, asked, verifier, loop_options.repro_tests,
                              log.dir / "reproduction")
                  if blind and verifier and asked is not None else None)
        if gate is not None and progress is not None:  # its rows wait for the base check
            gate = GatedVerifier(settling, on_failure=progress.discard)
            progress.hold()
            settling.add_done_callback(functools.partial(_shown_or_dropped, progress))
        judging: PatchVerifier | None = gate if gate is not None else verifier
        assert judging is not None
        loop = Loop(task, source, judging, log, loop_options, progress, schedule, writer)
        loop.sandbox = verifier.backend.name if verifier is not None else None
        with progress or contextlib.nullcontext():
            try:
                # on Ctrl-C the loop leaves a run.json agreeing with its attempts
                with timeline.span("selection"):  # the loop's own work, where nothing else runs
                    result = loop.run()
                    if gate is not None:  # even when no candidate got as far as its judging
                        settled, verifier = gate.settled()
                        result.summary = dataclasses.replace(
                            result.summary, sandbox=verifier.backend.name)
            except KeyboardInterrupt:
                raise KeyboardInterrupt(str(log.dir)) from None
            except BaseCheckFailed as failed:
                _discarded(loop, log, failed)
                raise failed.cause from None
            except UsageError:  # bad input every request met before any answer (a model
                # the endpoint lacks, a first prompt over its window): its one line says it all
                if progress is not None and not any(a.answer for a in loop.attempts):
                    progress.discard()
                raise
            finally:
                attempt_phases(timeline, loop.attempts)
        if gate is not None and show_progress and console is not None and (
                line := plan_line(settled)):
            console.print(markup_safe(line), highlight=False)
        if gate is not None and settled.base and settled.base.fail_to_pass_passing:
            passing_before = list(settled.base.fail_to_pass_passing)
            if show_progress and console is not None:
                console.print(markup_safe(_passing_before_line(passing_before)),
                              highlight=False)
        if judge is not None and verifier is not None:
            with judging_recorded(result, log), timeline.span("verification"):
                judgement = judge_candidates(judge, result, log,
                                             loop_options.verify_concurrency,
                                             not loop_options.judge_submitted)
            result = blind_outcome(result, judgement, log,
                                   verifier.blind.record() if verifier.blind else None)
        else:
            result = plain_outcome(result, protocol, has_hidden_tests(settled.task), log)
        writing = time.monotonic()
        if said or passing_before:  # what the loop's run.json cannot know: kept with it
            result.summary = dataclasses.replace(
                result.summary, environment=said,
                fail_to_pass_passing_before=list(passing_before))
        if teardown is not None:  # the result is complete: closing is left to the caller
            teardown(stack.pop_all().close)
    # the sandboxes are closed (or left to `teardown`): run.json once more, with where the
    # command's seconds went
    timeline.until_now("writing", since=writing)
    end = time.monotonic()
    result.summary = dataclasses.replace(
        result.summary, phases=timeline.split(end),
        command_wall_s=round(end - timeline.start, 3))
    log.write_summary(result.summary)
    return result, log


def attempt_phases(timeline: Timeline, attempts: Iterable[Attempt]) -> None:
    """Each attempt's generation (request to last token) and verification (last token to
    verdict, its wait for a verification slot included) as spans of `timeline`."""
    for attempt in attempts:
        if attempt.t_start is not None and attempt.t_generated is not None:
            timeline.add("generation", attempt.t_start, attempt.t_generated)
            if attempt.t_verified is not None:
                timeline.add("verification", attempt.t_generated, attempt.t_verified)


def _settle(draft: TaskPlan, opening: Future[TaskVerifier],
            timeline: Timeline) -> tuple[TaskPlan, TaskVerifier]:
    """make_plan on the verifier `opening` opened (in the set-up thread, after it)."""
    started: list[float] = []
    try:
        return make_plan(draft, lambda _draft: _started(started, opening.result()))
    finally:
        if started:
            timeline.until_now("base_check", since=started[0])


def _shown_or_dropped(progress: RunProgress, settling: Future[Any]) -> None:
    """The candidates' rows held back while the plan settled: shown, or (the base check
    failed: its one error line says it all) dropped."""
    if not settling.cancelled() and settling.exception() is None:
        progress.release()
    else:
        progress.discard()


def _abandon(settling: Future[tuple[TaskPlan, TaskVerifier]]) -> None:
    """At the run's end: close the settled verifier, now or whenever the set-up finishes (a
    model that refused the first request does not wait for the base check)."""

    def close(done: Future[tuple[TaskPlan, TaskVerifier]]) -> None:
        if not done.cancelled() and done.exception() is None:
            done.result()[1].close()

    settling.add_done_callback(close)


def _discarded(loop: Loop, log: RunLog, failed: BaseCheckFailed) -> None:
    """run.json of a run whose base check failed while the model answered."""
    answers = sum(1 for a in loop.attempts if a.answer)
    reason = (f"{failed.reason()}; the {answers} answer(s) received meanwhile were discarded"
              if answers else failed.reason())
    with contextlib.suppress(Exception):  # the error itself is what the user must see
        rounds = max((a.round for a in loop.attempts), default=0)
        log.write_summary(loop.summary("error", reason, None, rounds))


def _timed(timeline: Timeline, phase: str, function: Callable[..., T], *args: Any) -> T:
    with timeline.span(phase):
        return function(*args)


def _started(marks: list[float], value: T) -> T:
    """`value`, noting when it came (the base check starts then)."""
    marks.append(time.monotonic())
    return value


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


def _passing_before_line(ids: list[str]) -> str:
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    return (f"warning: FAIL_TO_PASS {ids[0]}{more} pass(es) on the unpatched code already: "
            "these tests cannot tell a fix from no change")


@contextlib.contextmanager
def _setup_failures_recorded(log: RunLog, task_id: str) -> Iterator[None]:
    """Before the loop starts (sandboxes, environment, the base check): an infrastructure
    failure leaves a run.json saying so; bad input leaves no run directory at all."""
    try:
        yield
    except UsageError:
        remove_workspace(log.dir)
        raise
    except (InfraError, KeyboardInterrupt) as exc:
        reason = one_line(exc) if isinstance(exc, InfraError) else INTERRUPTED
        with contextlib.suppress(InfraError):
            log.write_summary(RunSummary.error(log.run_id, task_id, reason))
        raise


def prepare_task(
    draft: TaskPlan,
    options: RunOptions,
    backend: SandboxBackend | None,
    work_root: Path,
    prestarted: Prestarted | None = None,
) -> tuple[TaskPlan, TaskVerifier]:
    """The settled plan of `draft` and the verifier that judges by it, opened as
    `open_verifier` opens it (agent/verify/prepare.py's make_plan; the caller closes it)."""
    return make_plan(draft, lambda plan: open_verifier(plan, options, backend, work_root,
                                                       prestarted))


def open_verifier(
    plan: TaskPlan,
    options: RunOptions,
    backend: SandboxBackend | None,
    work_root: Path,
    prestarted: Prestarted | None = None,
    blind: bool = False,
) -> TaskVerifier:
    """A TaskVerifier (on `backend`, or on a backend opened here and closed with it) whose
    sandboxes and baselines are already starting in the background; `blind`: a blind run's
    (its task is the visible one)."""
    own = backend is None
    if backend is None:
        name = options.sandbox.sandbox
        taken = prestarted.take_backend(name) if prestarted is not None else None
        backend = taken or open_backend(name, clean_leftovers=clean_leftovers(prestarted))
    opened = backend
    try:
        verifier = TaskVerifier(
            plan, opened, work_root, concurrency=options.loop.verify_concurrency,
            retry_failed_environment=options.sandbox.retry_failed_environments, blind=blind)
        if prestarted is not None:
            _adopt_prestarted(verifier, opened, prestarted)
        verifier.warm(min(options.loop.samples, options.loop.verify_concurrency))
    except BaseException:
        if own:
            opened.close()
        raise
    if own:
        verifier.on_close.append(opened.close)
    return verifier


def clean_leftovers(prestarted: Prestarted | None) -> bool:
    """Whether opening a backend should also remove dead invocations' containers."""
    return prestarted is None or not prestarted.leftovers_cleaned


def _adopt_prestarted(
    verifier: TaskVerifier, backend: SandboxBackend, prestarted: Prestarted
) -> None:
    """Give the verifier's pool the containers start-up started (up to its size), when they
    fit; the others go away."""
    adopted = 0
    while (started := prestarted.take_launch()) is not None:
        work, launched = started
        verifier.on_close.append(functools.partial(remove_workspace, work))
        # the pool's backend: a task environment's (EnvironmentBackend) refuses ooda's image
        sandbox = None if adopted >= verifier.pool.size else verifier.pool.backend.adopt(
            launched, requirements=verifier.plan.requirements)
        if sandbox is None:
            launched.release()  # its PID 1 sees the socket close and exits; Docker removes it
            continue
        verifier.pool.adopt(sandbox)
        adopted += 1


def _close_opened(opening: Future[TaskVerifier], work_root: Path) -> None:
    """Close the verifier the set-up opened. One still opening (the run ended first: bad
    input, an endpoint refused) is not waited for: it is closed when it is open, and the work
    directory, which its sandboxes were writing into while it was being removed, goes then."""
    def close_late(done: Future[TaskVerifier]) -> None:
        if done.exception() is None:
            done.result().close()
        remove_workspace(work_root)

    if opening.done():
        close_late(opening)
    else:
        opening.add_done_callback(close_late)
