"""Run one task end to end: pick the model and sandbox, set up the run directory, run the loop.

Shared by `ooda run`, `ooda eval` and `ooda ci`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from rich.console import Console

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Model
from ooda.agent.core.loop import Loop, LoopConfig, RunResult
from ooda.agent.core.runlog import RunLog, new_run_id
from ooda.agent.support.fstree import remove_workspace
from ooda.tasks.loader import Task

if TYPE_CHECKING:
    from ooda.agent.contracts.protocols import SandboxBackend
    from ooda.agent.verify.verifier import TaskVerifier


@dataclass
class RunOptions:
    """Everything `ooda run` can be told besides the task itself."""

    model: str | None = None
    """Model name sent to the endpoint; "gold" = the task's reference patch; "replay" = the
    bundled endpoint replaying the task's scripted answers (offline demo and tests)."""
    base_url: str | None = None
    """OpenAI-compatible endpoint; default from OPENAI_BASE_URL."""
    samples: int = 4
    """Candidates sampled in parallel per round."""
    rounds: int = 3
    """Feedback rounds at most."""
    time_budget_s: float = 600.0
    """Wall-clock budget for the whole task."""
    max_tokens: int | None = None
    """Token budget for the whole run (prompt + completion)."""
    select: Literal["first", "best"] = "first"
    """Stop at the first passing candidate, or pick the best of a round."""
    sandbox: str | None = None
    """docker | bwrap | local; None = Docker, else bubblewrap."""
    runs_dir: Path = Path("runs")
    """Where run directories go."""
    temperature: float = 0.8
    """Sampling temperature."""
    concurrency: int = 8
    """Model requests in flight at once."""
    verify_concurrency: int = 2
    """Candidates verified at once."""
    replay_tokens_per_s: float = 0.0
    """With --model replay: simulated generation speed (0 = instant)."""

    def validate(self) -> None:
        """Reject impossible values with a one-line UsageError."""
        if self.samples < 1:
            raise UsageError(f"--samples must be at least 1 (got {self.samples})")
        if self.rounds < 1:
            raise UsageError(f"--rounds must be at least 1 (got {self.rounds})")
        if self.time_budget_s <= 0:
            raise UsageError(f"--time-budget must be positive (got {self.time_budget_s})")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise UsageError(f"--max-tokens must be positive (got {self.max_tokens})")
        if self.concurrency < 1 or self.verify_concurrency < 1:
            raise UsageError("--concurrency and --verify-concurrency must be at least 1")
        if self.sandbox not in (None, "auto", "docker", "bwrap", "local"):
            raise UsageError(f"--sandbox must be docker, bwrap or local (got {self.sandbox!r})")
        if not self.model:
            raise UsageError(
                "no model given: pass --model NAME (with --base-url or OPENAI_BASE_URL), "
                "--model gold, or --model replay for the scripted offline demo"
            )


@contextlib.contextmanager
def open_model(options: RunOptions, task: Task) -> Iterator[Model]:
    """The model for this task; for "replay", a bundled endpoint runs for the duration."""
    if options.model == "gold":
        from ooda.agent.models.gold import GoldModel

        yield GoldModel(task.gold_patch, task.id)
        return
    from ooda.agent.models.openai_model import ModelConfig, OpenAIModel

    if options.model == "replay":
        from ooda.agent.models.server import ReplayServer

        if task.replay is None:
            raise UsageError(f"--model replay: task {task.id} ships no replay.jsonl")
        with ReplayServer([task.replay], tokens_per_s=options.replay_tokens_per_s) as server:
            base_url = server.start()
            config = ModelConfig(
                name="replay",
                base_url=base_url,
                api_key="ooda-local",
                temperature=options.temperature,
                concurrency=options.concurrency,
            )
            yield OpenAIModel(config)
        return
    assert options.model is not None
    config = ModelConfig(
        name=options.model,
        base_url=options.base_url or os.environ.get("OPENAI_BASE_URL"),
        api_key=os.environ.get("OPENAI_API_KEY"),
        temperature=options.temperature,
        concurrency=options.concurrency,
    )
    model = OpenAIModel(config)
    model.check_reachable()
    yield model


def run_task(
    task: Task,
    options: RunOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    model: Model | None = None,
    backend: SandboxBackend | None = None,
    run_id: str | None = None,
) -> tuple[RunResult, RunLog]:
    """Run the loop on one task and return its result and run directory.

    `model` and `backend` may be shared between tasks (`ooda eval`); otherwise they are made
    here from `options` and released at the end. `run_id` names the run directory under
    `options.runs_dir` (default: a fresh, time-stamped id).
    """
    options.validate()
    loop_config = LoopConfig(
        samples=options.samples,
        rounds=options.rounds,
        time_budget_s=options.time_budget_s,
        max_tokens=options.max_tokens,
        select=options.select,
        verify_concurrency=options.verify_concurrency,
    )
    with contextlib.ExitStack() as stack:
        work_root = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ooda-")))
        # Sandboxes start (and the base's baselines run) while the model client is set up and
        # the first answers stream: start-up stays off the critical path.
        with ThreadPoolExecutor(1, thread_name_prefix="ooda-setup") as setup:
            opening = setup.submit(open_verifier, task, options, backend, work_root)
            stack.callback(_close_opened, opening)
            if model is None:
                model = stack.enter_context(open_model(options, task))
            verifier = opening.result()
        task = verifier.task = derive_test_lists(task, verifier)
        log = RunLog(options.runs_dir, run_id or new_run_id(task.id))
        if show_progress and console is not None:
            from ooda.agent.app.progress import RunProgress

            progress = RunProgress(task.id, options.time_budget_s, options.rounds, console)
            with progress:
                result = Loop(task, model, verifier, log, loop_config, progress).run()
        else:
            result = Loop(task, model, verifier, log, loop_config).run()
        return result, log
    raise AssertionError("unreachable")


def open_verifier(
    task: Task, options: RunOptions, backend: SandboxBackend | None, work_root: Path
) -> TaskVerifier:
    """A TaskVerifier (on `backend`, or on a backend opened here and closed with it) whose
    sandboxes and baselines are already starting in the background."""
    from ooda.agent.verify.verifier import TaskVerifier

    own = backend is None
    if backend is None:
        from ooda.agent.startup import prestart

        backend = prestart.take(options.sandbox) or open_backend(options.sandbox)
    opened = backend
    try:
        verifier = TaskVerifier(task, opened, work_root, concurrency=options.verify_concurrency)
        _adopt_prestarted(verifier, opened)
        verifier.warm(min(options.samples, options.verify_concurrency))
    except BaseException:
        if own:
            opened.close()
        raise
    if own:
        verifier.on_close.append(opened.close)
    return verifier


def _adopt_prestarted(verifier: TaskVerifier, backend: SandboxBackend) -> None:
    """Give the verifier's pool the container agent/startup/prestart.py started, when it fits."""
    from ooda.agent.startup import prestart

    started = prestart.take_launch()
    if started is None:
        return
    work, launched = started
    verifier.on_close.append(lambda: remove_workspace(work))
    engine = getattr(backend, "engine", None)
    fits = launched.tag == getattr(backend, "image", None) and verifier.task.requirements is None
    if backend.name != "docker" or engine is None or not fits:
        launched.release()  # its PID 1 sees the socket close and exits; Docker removes it
        return
    from ooda.agent.sandbox.docker.backend import DockerSandbox

    try:
        sandbox = DockerSandbox(engine, "", launched.workspace, launched=launched)
    except Exception:  # the pool starts its own
        return
    verifier.pool.adopt(sandbox)


def _close_opened(opening: Future[TaskVerifier]) -> None:
    if opening.done() and opening.exception() is None:
        opening.result().close()


CLEAN_LEFTOVERS = True
"""Whether open_backend removes dead invocations' containers (the daemon, agent/startup/daemon.py, does
that between commands instead, and turns this off for its workers)."""


def open_backend(name: str | None) -> SandboxBackend:
    """The sandbox backend for a new invocation (`ooda run`, `eval`, `ci`); meanwhile, in the
    background (it does not block the backend), the Docker containers that killed or crashed
    earlier invocations left behind are removed (best effort: their owner process is gone)."""
    from ooda.agent.sandbox.registry import cleanup_leftovers, get_backend

    if CLEAN_LEFTOVERS and name in (None, "auto", "docker"):

        def cleanup() -> None:
            with contextlib.suppress(Exception):  # no engine, or it broke: get_backend says
                cleanup_leftovers()

        threading.Thread(target=cleanup, name="ooda-cleanup", daemon=True).start()
    return get_backend(name)


def derive_test_lists(task: Task, verifier: TaskVerifier) -> Task:
    """With only a test command, the tests that fail on the base become fail_to_pass and the
    ones that pass pass_to_pass (shared by `ooda run` and `ooda ci`).

    A command that is not a pytest run, or a base run that hangs or leaves no report, keeps the
    task graded by the command's exit code alone."""
    from ooda.verifiers.pytest_check.run import TestRunError

    if task.fail_to_pass or not task.test_cmd:
        return task
    try:
        outcomes = verifier.run_base_tests(task.test_cmd)
    except (ValueError, TestRunError):
        return task
    failing = sorted(t for t, outcome in outcomes.items() if outcome in ("failed", "error"))
    passing = sorted(t for t, outcome in outcomes.items() if outcome == "passed")
    if not failing:
        raise UsageError(
            f"every test of {task.test_cmd!r} passes on the unpatched code: nothing to fix"
        )
    return dataclasses.replace(task, fail_to_pass=failing, pass_to_pass=passing)
