"""Opening what a run judges with: the task verifier (on a backend given, taken from
start-up's, or opened; its sandboxes and baselines starting in the background), the plan
settled on the unpatched code in the set-up thread (`settle`), what is left over closed when a
run ends first; the schedule of the run's sources. Used by the run session
(agent/app/session.py, agent/app/setups.py) and by `ooda ci` (`prepare_task`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ooda.agent.app.options import RunOptions
from ooda.agent.contracts.protocols import Model, Sandbox, SandboxBackend
from ooda.agent.core.schedule import ModelSchedule, Price, Tier
from ooda.agent.core.sources import CandidateSource, LLMSource
from ooda.agent.sandbox.registry import open_backend
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.support.phases import Timeline
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier

if TYPE_CHECKING:
    from ooda.agent.sandbox.docker.launch import Launched

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

    def give_back(self, work: Path, sandbox: Sandbox) -> bool:
        """Hand an idle sandbox adopted from a taken container (with its directory `work`)
        back to whoever started it (the daemon, for its next command); False: end it."""
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
            retry_failed_environment=options.sandbox.retry_failed_environments, blind=blind,
            apply_rule="drop")
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
        given: list[bool] = []
        verifier.on_close.append(functools.partial(_remove_unless_given, work, given))
        # the pool's backend: a task environment's (EnvironmentBackend) refuses ooda's image
        sandbox = None if adopted >= verifier.pool.size else verifier.pool.backend.adopt(
            launched, requirements=verifier.plan.requirements)
        if sandbox is None:
            launched.release()  # its PID 1 sees the socket close and exits; Docker removes it
            continue
        verifier.pool.adopt(sandbox, keep=functools.partial(_give_back, prestarted, work, given))
        adopted += 1


def _give_back(prestarted: Prestarted, work: Path, given: list[bool], sandbox: Sandbox) -> bool:
    """The pool closes with `sandbox` idle: back to the daemon that gave it (then `work`,
    its directory, is the daemon's again)."""
    if prestarted.give_back(work, sandbox):
        given.append(True)
        return True
    return False


def _remove_unless_given(work: Path, given: list[bool]) -> None:
    if not given:
        remove_workspace(work)


def close_opened(opening: Future[TaskVerifier], work_root: Path) -> None:
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


def settle(draft: TaskPlan, opening: Future[TaskVerifier],
            timeline: Timeline) -> tuple[TaskPlan, TaskVerifier]:
    """make_plan on the verifier `opening` opened (in the set-up thread, after it)."""
    started: list[float] = []
    try:
        return make_plan(draft, lambda _draft: _started(started, opening.result()))
    finally:
        if started:
            timeline.until_now("base_check", since=started[0])


def abandon(settling: Future[tuple[TaskPlan, TaskVerifier]]) -> None:
    """At the run's end: close the settled verifier, now or whenever the set-up finishes (a
    model that refused the first request does not wait for the base check)."""

    def close(done: Future[tuple[TaskPlan, TaskVerifier]]) -> None:
        if not done.cancelled() and done.exception() is None:
            done.result()[1].close()

    settling.add_done_callback(close)


def timed(timeline: Timeline, phase: str, function: Callable[..., T], *args: Any) -> T:
    with timeline.span(phase):
        return function(*args)


def _started(marks: list[float], value: T) -> T:
    """`value`, noting when it came (the base check starts then)."""
    marks.append(time.monotonic())
    return value
