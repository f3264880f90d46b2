"""Run one task end to end: pick the model and sandbox, set up the run directory, run the loop.

Shared by `ooda run`, `ooda eval` and `ooda ci`.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from rich.console import Console

from ooda.agent.app.basecheck import check_base
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
from ooda.agent.contracts.defaults import DEFAULTS
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.contracts.protocols import EndpointReport, Model, SandboxBackend
from ooda.agent.core.loop import Loop, LoopConfig, RunResult
from ooda.agent.core.repro_writer import ReproWriter
from ooda.agent.core.runlog import RunLog, new_run_id
from ooda.agent.core.schedule import DEFAULT_BUDGET_BELOW, ModelSchedule, Price, Tier
from ooda.agent.models import ModelSpec, open_model
from ooda.agent.sandbox.environments.spec import EnvSpec
from ooda.agent.sandbox.registry import open_backend
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.support.text import one_line
from ooda.agent.support.textsafe import markup_safe
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.environment import check_environment_choice, environment_from_file
from ooda.tasks.hidden import has_hidden_tests, visible_task
from ooda.tasks.loader import Task

if TYPE_CHECKING:
    from ooda.agent.sandbox.docker.launch import Launched


@dataclass
class RunOptions:
    """Everything `ooda run` can be told besides the task itself."""

    model: str | None = None
    """Model name sent to the endpoint; "gold" = the task's reference patch; "replay" = the
    bundled endpoint replaying the task's scripted answers (offline demo and tests)."""
    base_url: str | None = None
    """OpenAI-compatible endpoint; default from OPENAI_BASE_URL."""
    samples: int = DEFAULTS.samples
    """Candidates sampled in parallel per round."""
    rounds: int = DEFAULTS.rounds
    """Feedback rounds at most."""
    time_budget_s: float = DEFAULTS.time_budget_s
    """Wall-clock budget for the whole task."""
    token_budget: int | None = None
    """Token budget for the whole run (prompt + completion)."""
    max_tokens: int | None = DEFAULTS.max_tokens
    """Completion tokens one answer may take (lowered to what the context window leaves)."""
    context_window: int | None = None
    """The model's context window in tokens; None: learned from the endpoint."""
    request_timeout_s: float | None = None
    """Longest time one model request may take; None: only the time budget bounds it."""
    max_prose_tokens: int = DEFAULTS.max_prose_tokens
    """Stop an answer that streams this many tokens of prose before any edit (0: never)."""
    select: Literal["first", "best"] = "first"
    """Stop at the first passing candidate, or pick the best of a round."""
    sandbox: str | None = None
    """docker | bwrap | local; None = Docker, else bubblewrap."""
    runs_dir: Path = Path("runs")
    """Where run directories go."""
    temperature: float = DEFAULTS.temperature
    """Sampling temperature."""
    concurrency: int = DEFAULTS.concurrency
    """Model requests in flight at once."""
    verify_concurrency: int = DEFAULTS.verify_concurrency
    """Candidates verified at once."""
    price_prompt: float | None = None
    """Dollars per million prompt tokens (for the cost shown; None = unpriced)."""
    price_completion: float | None = None
    """Dollars per million completion tokens."""
    replay_tokens_per_s: float = 0.0
    """With --model replay: simulated generation speed (0 = instant)."""
    retry_failed_environments: bool = False
    """Build again a task environment whose build failed before (`ooda eval --retry-errors`);
    otherwise a recorded failure is raised at once."""
    escalate_to: str | None = None
    """The stronger model later rounds escalate to (agent/core/schedule.py); `--model a,b`
    sets it too."""
    escalate_base_url: str | None = None
    """Its endpoint; None: the same as the model's."""
    escalate_key_env: str | None = None
    """The environment variable holding its API key; None: the same key as the model's."""
    escalate_price_prompt: float | None = None
    """Its dollars per million prompt tokens (None = unpriced)."""
    escalate_price_completion: float | None = None
    """Its dollars per million completion tokens."""
    escalate_after: int | None = None
    """Rounds of the fast model without a pass before escalating; None: all but the last."""
    escalate_below: float = DEFAULT_BUDGET_BELOW
    """Escalate once less than this fraction of the budget is left."""
    environment: str | None = None
    """For a task that names no environment: "auto" detects one from the repository's files
    (tasks/detect_environment.py), "none" keeps ooda's image, else a TOML file holding an
    [environment] table (`ooda run` and `ooda ci`); None: the task's own only (`ooda eval`)."""
    oracle: bool = False
    """Let the loop verify with the task's hidden tests and feed their failures back (an
    oracle's number); otherwise a task with hidden tests runs blind (agent/app/protocol.py)."""
    repro_tests: int = DEFAULTS.repro_tests
    """Reproduction tests a blind run asks the model for."""

    context_tokens: int = DEFAULTS.context_tokens
    """The most tokens the first prompt may take, the code it shows included (agent/context)."""

    def validate(self) -> None:
        """Reject impossible values with a one-line UsageError."""
        if self.context_tokens < 1:
            raise UsageError(f"--context-tokens must be positive (got {self.context_tokens})")
        if self.samples < 1:
            raise UsageError(f"--samples must be at least 1 (got {self.samples})")
        if self.rounds < 1:
            raise UsageError(f"--rounds must be at least 1 (got {self.rounds})")
        if self.time_budget_s <= 0:
            raise UsageError(f"--time-budget must be positive (got {self.time_budget_s})")
        if self.token_budget is not None and self.token_budget < 1:
            raise UsageError(f"--token-budget must be positive (got {self.token_budget})")
        self._validate_model_limits()
        if self.repro_tests < 0:
            raise UsageError(f"--repro-tests must not be negative (got {self.repro_tests})")
        if self.concurrency < 1 or self.verify_concurrency < 1:
            raise UsageError("--concurrency and --verify-concurrency must be at least 1")
        if self.sandbox not in (None, "auto", "docker", "bwrap", "local"):
            raise UsageError(f"--sandbox must be docker, bwrap or local (got {self.sandbox!r})")
        if self.environment is not None:
            check_environment_choice(self.environment)
        if not self.model:
            raise UsageError(
                "no model given: pass --model NAME (with --base-url or OPENAI_BASE_URL), "
                "--model gold, or --model replay for the scripted offline demo"
            )
        self._validate_escalation()

    def _validate_model_limits(self) -> None:
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be positive (got {self.max_tokens})")
        if self.max_tokens is not None and self.max_tokens > MAX_ANSWER_TOKENS:
            raise UsageError(
                f"--max-tokens caps each answer, as in OpenAI's API, and {self.max_tokens:,} is "
                f"more than models answer at once; for a token budget of the whole run (what "
                f"--max-tokens meant before), use --token-budget {self.max_tokens}")
        if self.context_window is not None and self.context_window < 1:
            raise UsageError(f"--context-window must be positive (got {self.context_window})")
        if self.request_timeout_s is not None and self.request_timeout_s <= 0:
            raise UsageError(
                f"--request-timeout must be positive (got {self.request_timeout_s:g})")
        if self.max_prose_tokens < 0:
            raise UsageError(
                f"--max-prose-tokens must not be negative (got {self.max_prose_tokens})")

    def _validate_escalation(self) -> None:
        names = [n.strip() for n in (self.model or "").split(",")]
        if len(names) > 2 or not all(names):
            raise UsageError(f"--model {self.model!r}: give one model, or two as FAST,STRONG")
        if len(names) == 2:
            if self.escalate_to and self.escalate_to != names[1]:
                raise UsageError("--model FAST,STRONG and --escalate-to name different models")
            self.model, self.escalate_to = names
        if self.escalate_to is None:
            return
        if self.escalate_to == self.model:
            raise UsageError("--escalate-to names the model itself")
        if self.escalate_after is not None and self.escalate_after < 1:
            raise UsageError(f"--escalate-after must be at least 1 (got {self.escalate_after})")
        if not 0 <= self.escalate_below < 1:
            raise UsageError(f"--escalate-below must be in [0, 1) (got {self.escalate_below})")
        if self.escalate_key_env and not os.environ.get(self.escalate_key_env):
            raise UsageError(f"--escalate-key-env: ${self.escalate_key_env} is not set")


MAX_ANSWER_TOKENS = 131_072
"""The largest `--max-tokens` taken: above it, the value is surely a run's budget (its meaning
before it capped each answer)."""


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
        """(its work directory, a started sandbox container) when one was started, else None."""
        ...


def model_spec(options: RunOptions) -> ModelSpec:
    """The model registry's spec (ooda.agent.models) for these options."""
    if not options.model:
        raise UsageError("no model given")  # RunOptions.validate says how to give one
    return ModelSpec(
        name=options.model,
        base_url=options.base_url,
        temperature=options.temperature,
        concurrency=options.concurrency,
        replay_tokens_per_s=options.replay_tokens_per_s,
        max_tokens=options.max_tokens,
        context_window=options.context_window,
        request_timeout_s=options.request_timeout_s,
    )


def escalation_spec(options: RunOptions) -> ModelSpec | None:
    """The registry's spec of the model `options` escalate to (None: no escalation)."""
    if not options.escalate_to:
        return None
    key = os.environ.get(options.escalate_key_env) if options.escalate_key_env else None
    return ModelSpec(
        name=options.escalate_to,
        base_url=options.escalate_base_url or options.base_url,
        api_key=key,
        temperature=options.temperature,
        concurrency=options.concurrency,
        replay_tokens_per_s=options.replay_tokens_per_s,
        max_tokens=options.max_tokens,
        request_timeout_s=options.request_timeout_s,
    )


def schedule_for(options: RunOptions, model: Model, strong: Model | None) -> ModelSchedule:
    """The run's models in escalation order, with their prices."""
    fast = Tier(model, Price(options.price_prompt or 0.0, options.price_completion or 0.0))
    if strong is None:
        return ModelSchedule(fast)
    return ModelSchedule(
        fast,
        Tier(
            strong,
            Price(options.escalate_price_prompt or 0.0, options.escalate_price_completion or 0.0),
            "strong",
        ),
        after_rounds=options.escalate_after,
        budget_below=options.escalate_below,
    )


def run_task(
    task: Task,
    options: RunOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    model: Model | None = None,
    backend: SandboxBackend | None = None,
    run_id: str | None = None,
    prestarted: Prestarted | None = None,
    strong: Model | None = None,
) -> tuple[RunResult, RunLog]:
    """Run the loop on one task and return its result and run directory.

    `model` and `backend` may be shared between tasks (`ooda eval`); otherwise they are made
    here from `options` and released at the end. `run_id` names the run directory under
    `options.runs_dir` (default: a fresh, time-stamped id). `prestarted`: what start-up began
    for this command (a backend, a container), taken when it fits. `strong`: the model to
    escalate to, when shared like `model` (otherwise opened here from `options.escalate_to`).
    """
    options.validate()
    said = apply_environment(task, options.environment, options.sandbox)
    if said and show_progress and console is not None:
        console.print(markup_safe(said), highlight=False)
    gold = options.model == "gold"  # the reference patch: one candidate, verified once
    protocol = protocol_for(options.oracle, options.model)
    blind = runs_blind(task, protocol)
    whole = task  # the task as the hidden tests judge it
    if blind:
        task = visible_task(task)  # all the loop and its verifier ever see
    loop_config = LoopConfig(
        samples=1 if gold else options.samples,
        rounds=1 if gold else options.rounds,
        time_budget_s=options.time_budget_s,
        token_budget=options.token_budget,
        max_prose_tokens=options.max_prose_tokens,
        select="blind" if blind else options.select,
        verify_concurrency=options.verify_concurrency,
        context_tokens=options.context_tokens,
        context_votes=0 if gold else DEFAULTS.context_votes,  # the reference patch votes not
    )
    log = RunLog(options.runs_dir, run_id or new_run_id(task.id))
    with contextlib.ExitStack() as stack:
        with _setup_failures_recorded(log, task.id):
            work_root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ooda-")))
            # Sandboxes start (and the base's baselines run) while the model client is set up and
            # the first answers stream: start-up stays off the critical path.
            with ThreadPoolExecutor(1, thread_name_prefix="ooda-setup") as setup:
                opening = setup.submit(open_verifier, task, options, backend, work_root,
                                       prestarted, blind)
                stack.callback(_close_opened, opening)
                if model is None:
                    model = stack.enter_context(open_model(model_spec(options), task))
                strong_spec = escalation_spec(options)
                if strong is None and strong_spec is not None:
                    strong = stack.enter_context(open_model(strong_spec, task))
                verifier = opening.result()
            judge = None
            if blind:  # the hidden tests, run on the base now and on candidates at the end
                judge = open_judge(whole, verifier, options.retry_failed_environments)
                stack.callback(judge.close)
            task = verifier.prepare()
            passing_before = check_base(judge or verifier, whole)
        if passing_before and show_progress and console is not None:
            console.print(markup_safe(_passing_before_line(passing_before)), highlight=False)
        if show_progress and console is not None:
            say_notices(model, console)
        schedule = schedule_for(options, model, strong)
        progress = (RunProgress(task.id, options.time_budget_s, options.rounds, console,
                                (options.price_prompt, options.price_completion))
                    if show_progress and console is not None else None)
        writer = (ReproWriter(task, model, verifier, options.repro_tests, log.dir / "reproduction")
                  if blind else None)
        loop = Loop(task, model, verifier, log, loop_config, progress, schedule, writer)
        with progress or contextlib.nullcontext():
            try:
                result = loop.run()
            except KeyboardInterrupt:
                _keep_partial(loop, log)
                raise KeyboardInterrupt(str(log.dir)) from None
        if judge is not None:
            with judging_recorded(result, log):
                judgement = judge_candidates(judge, result, log, options.verify_concurrency)
            result = blind_outcome(result, judgement, log,
                                   verifier.blind.record() if verifier.blind else None)
        else:
            result = plain_outcome(result, protocol, has_hidden_tests(whole), log)
        extra = {**({"environment": said} if said else {}),
                 **({PASSING_BEFORE: passing_before} if passing_before else {})}
        if extra:  # what the loop's run.json cannot know: kept with it
            result.summary.update(extra)
            log.write_summary(result.summary)
        return result, log
    raise AssertionError("unreachable")


def say_notices(model: Model, console: Console) -> None:
    """Print what the model client adapts to (requests at once, the context window) as it
    happens, one `note:` line each."""
    if isinstance(model, EndpointReport) and model.on_notice is None:
        model.on_notice = lambda text: console.print(f"[yellow]note:[/yellow] {markup_safe(text)}",
                                                     highlight=False)


PASSING_BEFORE = "fail_to_pass_passing_before"
"""run.json's list of FAIL_TO_PASS ids that passed on the unpatched code (absent when none)."""


def _passing_before_line(ids: list[str]) -> str:
    more = f" and {len(ids) - 1} more" if len(ids) > 1 else ""
    return (f"warning: FAIL_TO_PASS {ids[0]}{more} pass(es) on the unpatched code already: "
            "these tests cannot tell a fix from no change")


def apply_environment(task: Task, choice: str | None, sandbox: str | None = None) -> str | None:
    """Give `task` the environment `choice` asks for (`--environment auto|none|PATH`) when it
    names none itself (its own [environment] always wins); the one line that says what its
    tests run in, or None when there is nothing to say (ooda's image, as always).

    `auto` leaves alone a task that names its requirements (the light path: wheels on ooda's
    image) and `--sandbox local` (the user's own Python), and, with no Docker engine to build
    the detected environment, says so and keeps ooda's image (a PATH or the task's own table
    then fails the build, exit 3, as asked). An environment given here, like a
    task's own, turns ruff, mypy and the security stage off: ooda's tools are not in it."""
    if choice is None:
        return None
    if task.environment is not None:
        return None if choice == "auto" else (
            f"environment: the task's own [environment] (--environment {choice} ignored)")
    if choice == "none":
        return "environment: ooda's image (--environment none)"
    if choice == "auto":
        if task.requirements is not None or sandbox == "local":
            return None
        from ooda.tasks.detect_environment import detect_environment

        detected = detect_environment(task.repo)
        if detected is None:
            return None
        from ooda.agent.sandbox.docker.launch import docker_problem

        if docker_problem() is not None:  # bwrap alone: it runs images Docker builds
            return (f"environment: {detected.description} — detected, but building it needs "
                    "a Docker engine, which is not answering here: ooda's image instead "
                    "(start Docker to use it; --environment none to skip detection)")
        table, said = detected.table, (f"environment: {detected.description} — detected; "
                                       "--environment none to skip")
    else:
        table, said = environment_from_file(Path(choice)), f"environment: from {choice}"
        EnvSpec.from_dict(table, where=f"--environment {choice}")  # every key, before anything
    task.environment = table
    task.verifiers.ruff = task.verifiers.mypy = task.verifiers.security = False
    return said


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
        reason = one_line(exc) if isinstance(exc, InfraError) else "interrupted (Ctrl-C)"
        with contextlib.suppress(InfraError):
            log.write_summary({"run_id": log.run_id, "task_id": task_id, "status": "error",
                               "reason": reason, "attempts": 0, "winner": None})
        raise


def _keep_partial(loop: Loop, log: RunLog) -> None:
    """Ctrl-C: leave a run.json saying so beside the attempts recorded so far."""
    with contextlib.suppress(Exception):  # best effort: the user is waiting
        rounds = max((a.round for a in loop.attempts), default=0)
        log.write_summary(loop._summary("error", "interrupted (Ctrl-C)", None, rounds))


def open_verifier(
    task: Task,
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
        taken = prestarted.take_backend(options.sandbox) if prestarted is not None else None
        backend = taken or open_backend(options.sandbox,
                                        clean_leftovers=clean_leftovers(prestarted))
    opened = backend
    try:
        verifier = TaskVerifier(task, opened, work_root, concurrency=options.verify_concurrency,
                                retry_failed_environment=options.retry_failed_environments,
                                blind=blind)
        if prestarted is not None:
            _adopt_prestarted(verifier, opened, prestarted)
        verifier.warm(min(options.samples, options.verify_concurrency))
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
    """Give the verifier's pool the container start-up started, when it fits."""
    started = prestarted.take_launch()
    if started is None:
        return
    work, launched = started
    verifier.on_close.append(lambda: remove_workspace(work))
    # the pool's backend: a task environment's (EnvironmentBackend) refuses ooda's image
    sandbox = verifier.pool.backend.adopt(launched, requirements=verifier.task.requirements)
    if sandbox is None:
        launched.release()  # its PID 1 sees the socket close and exits; Docker removes it
        return
    verifier.pool.adopt(sandbox)


def _close_opened(opening: Future[TaskVerifier]) -> None:
    if opening.done() and opening.exception() is None:
        opening.result().close()
