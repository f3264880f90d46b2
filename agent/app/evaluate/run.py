"""`ooda eval`: run many tasks, K at a time, and keep score in an evaluation directory.

Layout of `<runs-dir>/<eval_id>/`:

    eval.json          what was asked (task set, options, task ids): checked on --resume
    results.jsonl      one line per finished task, appended and fsynced as each finishes
    summary.json       totals and metrics, rewritten atomically after each task
    predictions.jsonl  SWE-bench predictions (instance_id, model_name_or_path, model_patch)
    report.html, report.md
    tasks/<task_id>/   each task's run directory (run.json, attempts.jsonl, ...)

Tasks run on a thread pool and share one model client (whose own semaphore bounds the
requests in flight across tasks) and one sandbox backend. A crash loses at most the tasks that
were running: `--resume` keeps every task with a line in results.jsonl (a torn last line is
dropped, a task is never counted twice), deletes the partial run directories of the others
and runs them again. Infrastructure failures are results of their own ("error"), counted
apart from unresolved tasks and run again only with `--retry-errors`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from ooda.agent.app.eval_progress import EvalProgress
from ooda.agent.app.evaluate import ray_executor
from ooda.agent.app.evaluate.lock import LOCK_FILE, evaluation_lock
from ooda.agent.app.evaluate.options import (
    EVAL_FILE,
    RESULTS_FILE,
    SUMMARY_FILE,
    TASKS_DIR,
    WORK_DIR,
    EvalOptions,
    default_eval_id,
    fingerprint,
    result_options,
)
from ooda.agent.app.evaluate.records import (
    error_record,
    latest_by_task,
    patch_in,
    read_json,
    read_records,
    remove_path,
    run_record,
    write_outputs,
)
from ooda.agent.app.evaluate.refs import TaskRef, load_refs
from ooda.agent.app.run import Prestarted, RunOptions, clean_leftovers, run_task, say_notices
from ooda.agent.app.source import open_source
from ooda.agent.contracts.errors import EndpointRefused, InfraError, UsageError
from ooda.agent.contracts.protocols import Model, SandboxBackend
from ooda.agent.core.runlog import append_jsonl, write_atomic, write_json_atomic
from ooda.agent.core.sources import CandidateSource, source_kind
from ooda.agent.models import endpoint_of, open_model
from ooda.agent.sandbox.registry import cleanup_leftovers, open_backend
from ooda.agent.support.oserrors import storage_problem
from ooda.agent.support.phases import OTHER, Timeline
from ooda.agent.support.text import one_line
from ooda.tasks.loader import Task


class RunOne(Protocol):
    """`ooda.agent.app.run.run_task`'s shape (tests pass a fake)."""

    def __call__(self, task: Task, options: RunOptions, *, console: Console | None,
                 show_progress: bool, model: Model | CandidateSource | None, backend: SandboxBackend | None,
                 run_id: str | None, timeline: Timeline | None) -> tuple[Any, Any]: ...


@dataclass
class EvalOutcome:
    """What `evaluate` returns."""

    eval_dir: Path
    summary: dict[str, Any]
    ran: int
    """Tasks run in this invocation."""
    skipped: int
    """Tasks already finished in an earlier invocation (resume)."""


@dataclass
class _State:
    config: dict[str, Any]
    results: dict[str, dict[str, Any]]
    previous_wall_s: float
    timeline: Timeline
    """This invocation's phases, from its start (its tasks' spans join it)."""
    previous_phases: dict[str, float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    append_lock: threading.Lock = field(default_factory=threading.Lock)
    patches: dict[str, str] = field(default_factory=dict)

    def wall_s(self, now: float) -> float:
        return self.previous_wall_s + now - self.timeline.start

    def outputs(self) -> tuple[float, dict[str, float]]:
        """The wall time so far (earlier invocations included) and where it went."""
        now = time.monotonic()
        split = self.timeline.split(now)
        earlier = self.previous_phases or {OTHER: self.previous_wall_s}  # before phases existed
        merged = {k: round(split.get(k, 0.0) + float(earlier.get(k, 0.0)), 3) for k in split}
        return self.wall_s(now), merged


def evaluate(
    options: EvalOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    run_one: RunOne | None = None,
    backend: SandboxBackend | None = None,
    model: Model | None = None,
    prestarted: Prestarted | None = None,
    timeline: Timeline | None = None,
) -> EvalOutcome:
    """Run the task set and write the evaluation directory; returns its summary.

    `run_one` (default `ooda.agent.app.run.run_task`), `backend` and `model` can be given by the
    caller (tests); otherwise the backend comes from `--sandbox` and the model from
    `--model` and both are closed at the end. `prestarted`: what start-up began for this
    command (a started container the first task may adopt). `timeline`: the command's, with
    its start-up recorded (default: one from this call); summary.json's phases split its wall
    time."""
    timeline = timeline if timeline is not None else Timeline(start=time.monotonic())
    options = options.checked()
    if options.executor == "ray":
        ray_executor.check_available()
    eval_id = options.eval_id or default_eval_id(options)
    eval_dir = options.run.runs_dir / eval_id
    console = console or Console(stderr=True, soft_wrap=True)
    with evaluation_lock(eval_dir, eval_id, lambda line: console.print(f"ooda: {line}")):
        try:
            return _evaluate(options, eval_id, eval_dir, console, show_progress,
                             _Shared(run_one, backend, model, prestarted), timeline)
        except OSError as exc:  # a full disk: said as what it is, with what was kept
            why = storage_problem(exc)
            if why is None:
                raise
            kept = len(latest_by_task(read_records(eval_dir / RESULTS_FILE)))
            raise InfraError(f"{why}: the evaluation stopped; the {kept} task(s) finished are "
                             f"kept in {eval_dir}: free some space, then rerun with --resume"
                             ) from exc


@dataclass(frozen=True)
class _Shared:
    """What the caller of `evaluate` may give every task (see `evaluate`)."""

    run_one: RunOne | None
    backend: SandboxBackend | None
    model: Model | None
    prestarted: Prestarted | None


def _evaluate(options: EvalOptions, eval_id: str, eval_dir: Path, console: Console,
              show_progress: bool, shared: _Shared, timeline: Timeline) -> EvalOutcome:
    """`evaluate` with the directory's lock held."""
    run_one, backend, model, prestarted = (shared.run_one, shared.backend, shared.model,
                                           shared.prestarted)
    with timeline.span("task"):
        refs = load_refs(options, eval_dir / WORK_DIR)
    _check_model_inputs(options, refs)
    config = _config(options, eval_id, refs)
    results, previous_wall, previous_phases = _check_dir(eval_dir, config, options)
    todo = [r for r in refs if r.id not in results]
    if run_one is None:
        run_one = functools.partial(run_task, prestarted=prestarted)
    task_options = options.run.replace(
        runs_dir=eval_dir / TASKS_DIR, concurrency=options.model_requests(),
        retry_failed_environments=options.retry_errors,
    )
    cluster = None
    with contextlib.ExitStack() as stack:
        if todo and options.executor == "ray":  # the nodes open their own backend and model
            cluster = stack.enter_context(ray_executor.connect(
                options.ray_address, concurrency=options.concurrency,
                requests=options.model_requests(), sandbox=options.run.sandbox.sandbox,
                log_dir=eval_dir))
        elif todo:  # resources first: a missing sandbox leaves the directory untouched
            if backend is None:
                with timeline.span("environment"):
                    backend = open_backend(options.run.sandbox.sandbox,
                                           clean_leftovers=clean_leftovers(prestarted))
                stack.callback(backend.close)
            if model is None and source_kind(options.run.model.name).open is None:
                with timeline.span("generation"):
                    model = stack.enter_context(_shared_model(task_options, refs))
                if show_progress:
                    say_notices(model, console)
        _open_dir(eval_dir, config, results, resuming=bool(results) or options.resume)
        state = _State(config, results, previous_wall, timeline, previous_phases)
        bar = EvalProgress(console, eval_id, len(refs),
                           (options.run.model.price_prompt, options.run.model.price_completion))
        bar.note(list(results.values()))
        with _shown(bar, show_progress):

            refused = threading.Event()

            def work(ref: TaskRef) -> None:
                if refused.is_set():  # the endpoint refused a task: every other one too
                    return
                bar.start(ref.id)
                try:
                    record = _run_ref(ref, task_options, eval_dir, run_one, model, backend,
                                      timeline)
                except EndpointRefused:
                    refused.set()
                    raise
                bar.note(_finish(eval_dir, state, record))

            if cluster is not None:
                cluster.run(todo, task_options, eval_dir,
                            lambda record: bar.note(_finish(eval_dir, state, record)),
                            on_start=bar.start,
                            say=lambda line: console.print(f"ooda: {line}", markup=False,
                                                           highlight=False))
            else:
                _run_in_threads(todo, work, options.concurrency, eval_dir)
        writing = time.monotonic()
    timeline.until_now("writing", since=writing)  # the backend and the model closed too
    wall_s, phases = state.outputs()
    summary = write_outputs(eval_dir, config, list(state.results.values()), wall_s,
                            _patch_cache(eval_dir, state), phases)
    finished = [r for r in state.results.values() if r["status"] != "error"]
    if todo and state.results and not finished:
        first = next(iter(state.results.values()))
        raise InfraError(
            f"every task ended in an infrastructure error (first, {first['task_id']}: "
            f"{first.get('reason', '')}); see {eval_dir}; rerun with --resume --retry-errors"
        )
    return EvalOutcome(eval_dir, summary, len(todo), len(refs) - len(todo))


def _run_in_threads(todo: list[TaskRef], work: Callable[[TaskRef], None], concurrency: int,
                    eval_dir: Path) -> None:
    """`work` on each task, `concurrency` at a time, in this process."""
    # no `with`: on Ctrl-C nobody waits for the running tasks (a request may hang)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="ooda-eval")
    futures = [pool.submit(work, ref) for ref in todo]
    try:
        for fut in futures:
            fut.result()
    except KeyboardInterrupt:  # the CLI says where the partial evaluation is
        pool.shutdown(wait=False, cancel_futures=True)
        raise KeyboardInterrupt(str(eval_dir)) from None
    except EndpointRefused:  # the tasks running meet it at their first request
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _check_model_inputs(options: EvalOptions, refs: Sequence[TaskRef]) -> None:
    if source_kind(options.run.model.name).oracle:  # it answers from the gold patch
        missing = [r.id for r in refs if not r.has_gold]
        if missing:
            raise UsageError(f"--model {options.run.model.name}: {len(missing)} task(s) have "
                             "no gold patch "
                             f"(first: {missing[0]})")
    if options.run.model.name == "replay":
        missing = [r.id for r in refs if r.replay is None]
        if missing:
            raise UsageError(f"--model replay: {len(missing)} task(s) ship no replay.jsonl "
                             f"(first: {missing[0]})")


def _config(options: EvalOptions, eval_id: str, refs: Sequence[TaskRef]) -> dict[str, Any]:
    return {
        "eval_id": eval_id,
        "taskset": str(options.taskset.resolve()),
        "fingerprint": fingerprint(options),
        "options": {
            **result_options(options.run),
            "base_url": endpoint_of(options.run.model.name, options.run.model.base_url)
            if source_kind(options.run.model.name).asks_endpoint else None,
            "sandbox": options.run.sandbox.sandbox,
            "verify_concurrency": options.run.loop.verify_concurrency,
        },
        "concurrency": options.concurrency,
        "requests": options.model_requests(),
        "repos_dir": str(options.repos_dir.resolve()) if options.repos_dir else None,
        "price_prompt": options.run.model.price_prompt,
        "price_completion": options.run.model.price_completion,
        "task_ids": [r.id for r in refs],
    }


def _check_dir(
    eval_dir: Path, config: dict[str, Any], options: EvalOptions
) -> tuple[dict[str, dict[str, Any]], float, dict[str, float]]:
    """Check (read-only) that the evaluation directory may be used; returns the records of
    the tasks already finished, and the wall-clock seconds earlier invocations spent and
    where they went."""
    if eval_dir.exists() and not eval_dir.is_dir():
        raise UsageError(f"{eval_dir}: exists and is not a directory")
    started = (eval_dir / RESULTS_FILE).exists() or (
        (eval_dir / TASKS_DIR).is_dir() and any((eval_dir / TASKS_DIR).iterdir())
    )
    occupied = started or (
        eval_dir.is_dir() and any(p.name not in (EVAL_FILE, TASKS_DIR, LOCK_FILE,
                                                 ray_executor.RAY_LOG_FILE)
                                  for p in eval_dir.iterdir())
    )
    if occupied and not options.resume:
        raise UsageError(
            f"{eval_dir} already holds an evaluation: add --resume to finish it, "
            "or pass a new --eval-id"
        )
    old = read_json(eval_dir / EVAL_FILE)
    if old is not None and old.get("fingerprint") != config["fingerprint"]:
        raise UsageError(
            f"{eval_dir} was made with other options "
            f"({_differences(old.get('fingerprint') or {}, config['fingerprint'])}): "
            "pass a new --eval-id"
        )
    if old is not None and old.get("task_ids") != config["task_ids"]:
        raise UsageError(f"{eval_dir}: the task set changed since this evaluation began; "
                         "pass a new --eval-id")
    ids = set(config["task_ids"])
    results = {
        task_id: record
        for task_id, record in latest_by_task(read_records(eval_dir / RESULTS_FILE)).items()
        if task_id in ids and not (options.retry_errors and record.get("status") == "error")
    }
    previous = read_json(eval_dir / SUMMARY_FILE) or {}
    phases = previous.get("phases")
    earlier = {str(k): float(v) for k, v in phases.items()} if isinstance(phases, dict) else {}
    return results, float(previous.get("wall_s") or 0.0), earlier


def _open_dir(eval_dir: Path, config: dict[str, Any], results: dict[str, dict[str, Any]],
              resuming: bool) -> None:
    """Make the directory ready to append to. When resuming: results.jsonl rewritten clean
    (no torn line, no duplicate, no error record about to be retried), partial run
    directories deleted, containers of a crashed invocation removed."""
    eval_dir.mkdir(parents=True, exist_ok=True)
    if resuming:
        write_atomic(eval_dir / RESULTS_FILE,
                     "".join(json.dumps(r) + "\n" for r in results.values()))
        _clear_partial(eval_dir, results)
        _cleanup_leftovers()
    (eval_dir / TASKS_DIR).mkdir(exist_ok=True)
    write_json_atomic(eval_dir / EVAL_FILE, config)


def _differences(old: dict[str, Any], new: dict[str, Any]) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    return ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys[:3]) or "unknown"


def _clear_partial(eval_dir: Path, finished: dict[str, dict[str, Any]]) -> None:
    """Delete the run directories of tasks cut off mid-run and the scratch exports."""
    tasks_dir = eval_dir / TASKS_DIR
    if tasks_dir.is_dir():
        for run_dir in tasks_dir.iterdir():
            if run_dir.name not in finished:
                remove_path(run_dir)
    remove_path(eval_dir / WORK_DIR)


def _cleanup_leftovers() -> None:
    """Remove sandbox containers a crashed earlier invocation left behind."""
    with contextlib.suppress(Exception):  # best effort: a missing engine is no reason to stop
        cleanup_leftovers()


def _shared_model(options: RunOptions, refs: Sequence[TaskRef]) -> AbstractContextManager[Model]:
    """One model for all tasks; for "replay", one bundled endpoint over every task's script."""
    replays = [r.replay for r in refs if r.replay is not None]
    return open_model(options.model, None, replays=replays)


def _run_ref(ref: TaskRef, options: RunOptions, eval_dir: Path, run_one: RunOne,
             shared_model: Model | None, backend: SandboxBackend | None,
             timeline: Timeline | None = None) -> dict[str, Any]:
    """Run one task and return its results.jsonl record; never raises for the task's own
    failures (they become status "error"). Its phases join `timeline`'s."""
    started = time.monotonic()
    own = Timeline(start=started, parent=timeline)
    run_dir = eval_dir / TASKS_DIR / ref.id
    remove_path(run_dir)
    try:
        with own.span("task"):
            task = ref.load()
        with contextlib.ExitStack() as stack:
            # no shared model: a source of the task's own answers for it
            model = shared_model or stack.enter_context(open_source(options.model, task))
            result, log = run_one(task, options, console=None, show_progress=False,
                                  model=model, backend=backend, run_id=ref.id, timeline=own)
        record = run_record(ref.id, str(result.status), result.summary, Path(log.dir),
                            eval_dir)
    except EndpointRefused:  # every task would meet it (a wrong key, a model the endpoint
        raise  # lacks): the evaluation stops, exit 2; the finished tasks stay recorded
    except OSError as exc:
        if storage_problem(exc) is not None:  # a full disk: the evaluation stops (exit 3)
            raise
        record = error_record(ref.id, f"internal error: {type(exc).__name__}: {one_line(exc)}",
                              time.monotonic() - started, run_dir, eval_dir)
    except (InfraError, UsageError) as exc:
        record = error_record(ref.id, one_line(exc), time.monotonic() - started, run_dir,
                              eval_dir)
    except Exception as exc:  # a bug in one task's run must not sink the evaluation
        record = error_record(ref.id, f"internal error: {type(exc).__name__}: {one_line(exc)}",
                              time.monotonic() - started, run_dir, eval_dir)
    finally:
        with contextlib.suppress(Exception):
            ref.release()
    return record


def _finish(eval_dir: Path, state: _State, record: dict[str, Any]) -> list[dict[str, Any]]:
    """Record a finished task: append its line (fsynced), then rewrite the summaries;
    returns the records so far."""
    record["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    append_jsonl(eval_dir / RESULTS_FILE, record, state.append_lock)
    with state.lock:
        state.results[record["task_id"]] = record
        records = list(state.results.values())
        wall_s, phases = state.outputs()
        write_outputs(eval_dir, state.config, records, wall_s, _patch_cache(eval_dir, state),
                      phases)
    return records


def _patch_cache(eval_dir: Path, state: _State) -> Callable[[dict[str, Any]], str]:
    read = patch_in(eval_dir)

    def cached(record: dict[str, Any]) -> str:
        task_id = record["task_id"]
        patch = state.patches.get(task_id)
        if patch is None:
            patch = state.patches[task_id] = read(record)
        return patch

    return cached


@contextlib.contextmanager
def _shown(bar: EvalProgress, enabled: bool) -> Iterator[EvalProgress]:
    """The live display while tasks run (nothing with --json)."""
    if not enabled:
        yield bar
        return
    with bar.shown():
        yield bar

