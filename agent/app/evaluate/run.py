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
import dataclasses
import functools
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console

from ooda.agent.app import metrics, report
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.core.runlog import append_jsonl, write_atomic, write_json_atomic
from ooda.agent.support import fstree

if TYPE_CHECKING:
    from ooda.agent.app.run import RunOptions
    from ooda.agent.contracts.protocols import Model, SandboxBackend
    from ooda.tasks.loader import Task

EVAL_FILE = "eval.json"
RESULTS_FILE = "results.jsonl"
SUMMARY_FILE = "summary.json"
PREDICTIONS_FILE = "predictions.jsonl"
TASKS_DIR = "tasks"
WORK_DIR = ".work"
"""Scratch space for repos exported from SWE-bench clones while their task runs."""

RESULT_OPTIONS = (
    "model", "base_url", "samples", "rounds", "time_budget_s", "max_tokens", "select",
    "temperature",
)
"""RunOptions fields that change results: they go into the default eval id's hash and are
checked when resuming."""


# --------------------------------------------------------------------------- options


@dataclass
class EvalOptions:
    """Everything `ooda eval` is told."""

    taskset: Path
    """A directory of task directories, or a SWE-bench `.jsonl`."""
    run: RunOptions
    """Per-task options; `run.runs_dir` is where the evaluation directory goes."""
    concurrency: int = 1
    """Tasks run at once."""
    requests: int | None = None
    """Model requests in flight at once, across all tasks (None: samples x concurrency,
    at most 64)."""
    eval_id: str | None = None
    """Name of the evaluation directory (default: derived from the task set, model, options)."""
    resume: bool = False
    """Continue the evaluation in an existing directory."""
    retry_errors: bool = False
    """With resume: run the tasks that ended in an infrastructure error again."""
    repos_dir: Path | None = None
    """SWE-bench: directory of local clones named owner__name."""
    only: list[str] | None = None
    """Run only these task ids."""
    price_prompt: float | None = None
    """Dollars per million prompt tokens."""
    price_completion: float | None = None
    """Dollars per million completion tokens."""

    def validate(self) -> None:
        """Reject impossible values with a one-line UsageError."""
        if self.concurrency < 1:
            raise UsageError(f"--concurrency must be at least 1 (got {self.concurrency})")
        if self.requests is not None and self.requests < 1:
            raise UsageError(f"--requests must be at least 1 (got {self.requests})")
        for name, price in (("--price-prompt", self.price_prompt),
                            ("--price-completion", self.price_completion)):
            if price is not None and not price >= 0:
                raise UsageError(f"{name} must be a non-negative number (got {price})")
        if self.retry_errors and not self.resume:
            raise UsageError("--retry-errors only makes sense with --resume")
        if self.eval_id is not None and not _SAFE_ID.match(self.eval_id):
            raise UsageError(
                f"--eval-id {self.eval_id!r}: use letters, digits and . _ - "
                "(starting with a letter or digit)"
            )
        self.run.validate()

    def model_requests(self) -> int:
        if self.requests is not None:
            return self.requests
        return max(1, min(64, self.run.samples * self.concurrency))


_SAFE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def result_options(run: RunOptions) -> dict[str, Any]:
    """The options that change results, as plain JSON values."""
    return {name: getattr(run, name) for name in RESULT_OPTIONS}


def fingerprint(options: EvalOptions) -> dict[str, Any]:
    """What identifies an evaluation: the task set (absolute path), the task filter and the
    options that change results. Concurrency, sandbox and prices are left out."""
    return {
        "taskset": str(options.taskset.resolve()),
        "only": sorted(options.only) if options.only else None,
        **result_options(options.run),
    }


def default_eval_id(options: EvalOptions) -> str:
    """`<taskset name>-<model>-<8 hex digits>`: the same command gives the same id."""
    digest = hashlib.sha256(
        json.dumps(fingerprint(options), sort_keys=True).encode()
    ).hexdigest()[:8]
    name = options.taskset.name
    if name.endswith(".jsonl"):
        name = name[: -len(".jsonl")]
    return f"{_slug(name)}-{_slug(options.run.model or 'model')}-{digest}"


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40]
    return slug or "x"


# --------------------------------------------------------------------------- task sets


@dataclass
class TaskRef:
    """One task of the set, loaded when its turn comes (SWE-bench repos are exported then)."""

    id: str
    load: Callable[[], Task]
    release: Callable[[], None] = lambda: None
    replay: Path | None = None
    has_gold: bool = False


def load_refs(options: EvalOptions, work_dir: Path) -> list[TaskRef]:
    """The task set as TaskRefs, validated (UsageError on bad input), `--only` applied."""
    path = options.taskset
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if path.is_file():
        if path.suffix != ".jsonl":
            raise UsageError(
                f"{path}: a task set is a directory of task directories or a SWE-bench .jsonl"
            )
        return _swebench_refs(options, work_dir)
    if options.repos_dir is not None:
        raise UsageError("--repos-dir is only for a SWE-bench .jsonl task set")
    from ooda.tasks.loader import load_taskset

    tasks = load_taskset(path)
    ids = [t.id for t in tasks]
    wanted = set(_check_only(ids, options.only))
    return [
        TaskRef(t.id, functools.partial(_same, t), replay=t.replay, has_gold=bool(t.gold_patch))
        for t in tasks
        if t.id in wanted
    ]


def _same(task: Task) -> Task:
    return task


def _swebench_refs(options: EvalOptions, work_dir: Path) -> list[TaskRef]:
    from ooda.tasks.importers.swebench import check_commits, materialize, read_instances

    if options.repos_dir is None:
        raise UsageError(
            f"{options.taskset}: SWE-bench instances need --repos-dir DIR "
            "(local clones named owner__name)"
        )
    if not options.repos_dir.is_dir():
        raise UsageError(f"--repos-dir {options.repos_dir}: not a directory")
    instances = read_instances(options.taskset, options.only)
    check_commits(instances, options.repos_dir)
    repos_dir = options.repos_dir
    refs = []
    for inst in instances:
        where = work_dir / inst.instance_id
        refs.append(TaskRef(
            inst.instance_id,
            load=functools.partial(materialize, inst, repos_dir, where),
            release=functools.partial(_remove, where),
            has_gold=True,
        ))
    return refs


def _check_only(ids: Sequence[str], only: Sequence[str] | None) -> list[str]:
    if not only:
        return list(ids)
    missing = [i for i in only if i not in ids]
    if missing:
        raise UsageError(f"--only {missing[0]}: no such task in the task set")
    return list(only)


# --------------------------------------------------------------------------- files


def read_records(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file; a torn or corrupt line (a crash mid-write) is
    skipped, as is anything that is not an object with a task_id. Missing file: []."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    records = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("task_id"), str):
            records.append(record)
    return records


def latest_by_task(records: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per task id, the last one written winning (insertion order = first seen)."""
    by_task: dict[str, dict[str, Any]] = {}
    for record in records:
        by_task.pop(record["task_id"], None)
        by_task[record["task_id"]] = record
    return by_task


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) else None


def run_record(task_id: str, status: str, summary: dict[str, Any], run_dir: Path,
               eval_dir: Path) -> dict[str, Any]:
    """The results.jsonl line of a finished run (status resolved | unresolved | error)."""
    attempts = read_records_any(run_dir / "attempts.jsonl")
    stats = metrics.attempt_stats(attempts)
    tokens = summary.get("tokens") or {}
    return {
        "task_id": task_id,
        "status": {"passed": "resolved", "error": "error"}.get(status, "unresolved"),
        "reason": str(summary.get("reason", "")),
        "attempts": int(summary.get("attempts", len(attempts))),
        "rounds": int(summary.get("rounds_used", 0)),
        "n": stats["n"],
        "c": stats["c"],
        "time_to_first_pass_s": summary.get("time_to_first_pass_s"),
        "tokens": {"prompt": int(tokens.get("prompt", 0)),
                   "completion": int(tokens.get("completion", 0))},
        "last_failed_verifier": stats["last_failed_verifier"],
        "edit_formats": stats["edit_formats"],
        "invalid_reasons": stats["invalid_reasons"],
        "wall_s": float(summary.get("wall_s", 0.0)),
        "generation_s": stats["generation_s"],
        "verification_s": stats["verification_s"],
        "verifier_run_s": stats["verifier_run_s"],
        "run_dir": _relative(run_dir, eval_dir),
    }


def error_record(task_id: str, reason: str, wall_s: float, run_dir: Path,
                 eval_dir: Path) -> dict[str, Any]:
    """The results.jsonl line of a task that could not be run (infrastructure, bad task)."""
    return {
        "task_id": task_id, "status": "error", "reason": reason, "attempts": 0, "rounds": 0,
        "n": 0, "c": 0, "time_to_first_pass_s": None, "tokens": {"prompt": 0, "completion": 0},
        "last_failed_verifier": None, "wall_s": round(wall_s, 3), "generation_s": 0.0,
        "verification_s": 0.0, "verifier_run_s": 0.0,
        "run_dir": _relative(run_dir, eval_dir) if run_dir.exists() else None,
    }


def read_records_any(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a .jsonl file, skipping torn lines (attempts.jsonl and the like)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    out = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            record = json.loads(line)
            if isinstance(record, dict):
                out.append(record)
    return out


def _relative(path: Path, base: Path) -> str:
    try:
        return path.resolve().relative_to(base.resolve()).as_posix()
    except ValueError:
        return str(path)


def build_summary(config: dict[str, Any], results: Sequence[dict[str, Any]],
                  wall_s: float) -> dict[str, Any]:
    """summary.json from eval.json's `config` and the result records (pure)."""
    task_ids = list(config.get("task_ids", []))
    order = {t: i for i, t in enumerate(task_ids)}
    results = sorted((r for r in results if r["task_id"] in order),
                     key=lambda r: order[r["task_id"]])
    options = config.get("options", {})
    figures = metrics.summarize(
        results,
        total=len(task_ids),
        samples=int(options.get("samples", 1)),
        price_prompt=config.get("price_prompt"),
        price_completion=config.get("price_completion"),
    )
    summary: dict[str, Any] = {
        "eval_id": config.get("eval_id"),
        "taskset": config.get("taskset"),
        "model": options.get("model"),
        "samples": options.get("samples"),
        "rounds": options.get("rounds"),
        "time_budget_s": options.get("time_budget_s"),
        "concurrency": config.get("concurrency"),
        "complete": figures["finished"] == len(task_ids),
        "total": figures.pop("total"),
        "resolved": figures.pop("resolved"),
        "resolved_rate": figures.pop("resolved_rate"),
        "pass_at_k": figures.pop("pass_at_k"),
        "wall_s": round(wall_s, 3),
        "tasks_per_min": round(figures["finished"] / wall_s * 60, 3) if wall_s > 0 else None,
        "tokens": figures.pop("tokens"),
        **figures,
    }
    if options.get("model") == "gold":
        summary["gold_failures"] = [
            {"task_id": r["task_id"], "status": r["status"], "reason": r.get("reason", ""),
             "last_failed_verifier": r.get("last_failed_verifier")}
            for r in results if r["status"] != "resolved"
        ]
    return summary


def predictions(config: dict[str, Any], results: Sequence[dict[str, Any]],
                patch_of: Callable[[dict[str, Any]], str]) -> list[dict[str, str]]:
    """SWE-bench predictions for the finished tasks, in task-set order; the winning patch
    for resolved tasks, an empty patch otherwise."""
    by_task = {r["task_id"]: r for r in results}
    model = str(config.get("options", {}).get("model") or "")
    return [
        {
            "instance_id": task_id,
            "model_name_or_path": model,
            "model_patch": patch_of(by_task[task_id]) if by_task[task_id]["status"] == "resolved"
            else "",
        }
        for task_id in config.get("task_ids", [])
        if task_id in by_task
    ]


def patch_in(eval_dir: Path) -> Callable[[dict[str, Any]], str]:
    """Reads a result's final.diff from its run directory ("" when there is none)."""

    def read(record: dict[str, Any]) -> str:
        run_dir = record.get("run_dir")
        if not isinstance(run_dir, str) or not run_dir:
            return ""
        try:
            return (eval_dir / run_dir / "final.diff").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return ""

    return read


def write_outputs(eval_dir: Path, config: dict[str, Any], results: Sequence[dict[str, Any]],
                  wall_s: float, patch_of: Callable[[dict[str, Any]], str] | None = None
                  ) -> dict[str, Any]:
    """Rewrite summary.json, predictions.jsonl, report.html and report.md atomically."""
    summary = build_summary(config, results, wall_s)
    preds = predictions(config, results, patch_of or patch_in(eval_dir))
    write_json_atomic(eval_dir / SUMMARY_FILE, summary)
    write_atomic(eval_dir / PREDICTIONS_FILE, "".join(json.dumps(p) + "\n" for p in preds))
    ordered = [r for r in results if r["task_id"] in set(config.get("task_ids", []))]
    write_atomic(eval_dir / "report.html", report.eval_html(summary, ordered))
    write_atomic(eval_dir / "report.md", report.eval_markdown(summary, ordered))
    return summary


def rerender_report(path: Path) -> list[Path]:
    """`ooda report DIR`: write report.html and report.md again from the files in DIR, an
    evaluation directory (summary recomputed from results.jsonl when eval.json is there)
    or a single run directory (run.json, attempts.jsonl)."""
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    if (path / EVAL_FILE).is_file() or (path / RESULTS_FILE).is_file():
        config = read_json(path / EVAL_FILE)
        results = list(latest_by_task(read_records(path / RESULTS_FILE)).values())
        old = read_json(path / SUMMARY_FILE) or {}
        if config is None:
            if not old:
                raise UsageError(f"{path}: neither eval.json nor summary.json is readable")
            summary = old
            ordered = results
        else:
            summary = build_summary(config, results, float(old.get("wall_s") or 0.0))
            write_json_atomic(path / SUMMARY_FILE, summary)
            ids = set(config.get("task_ids", []))
            ordered = [r for r in results if r["task_id"] in ids]
        write_atomic(path / "report.html", report.eval_html(summary, ordered))
        write_atomic(path / "report.md", report.eval_markdown(summary, ordered))
        return [path / "report.html", path / "report.md"]
    if (path / "run.json").is_file() or (path / "attempts.jsonl").is_file():
        run = read_json(path / "run.json") or {"run_id": path.name, "status": "unfinished"}
        attempts = read_records_any(path / "attempts.jsonl")
        final = path / "final.diff"
        patch = final.read_text(encoding="utf-8", errors="replace") if final.is_file() else ""
        write_atomic(path / "report.html", report.run_html(run, attempts, patch))
        write_atomic(path / "report.md", report.run_markdown(run, attempts, patch))
        return [path / "report.html", path / "report.md"]
    raise UsageError(
        f"{path}: neither an evaluation directory (results.jsonl) nor a run directory (run.json)"
    )


# --------------------------------------------------------------------------- running


class RunOne(Protocol):
    """`ooda.agent.app.run.run_task`'s shape (tests pass a fake)."""

    def __call__(self, task: Task, options: RunOptions, *, console: Console | None,
                 show_progress: bool, model: Model | None, backend: SandboxBackend | None,
                 run_id: str | None) -> tuple[Any, Any]: ...


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
    started: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    append_lock: threading.Lock = field(default_factory=threading.Lock)
    patches: dict[str, str] = field(default_factory=dict)

    def wall_s(self) -> float:
        return self.previous_wall_s + time.monotonic() - self.started


def evaluate(
    options: EvalOptions,
    *,
    console: Console | None = None,
    show_progress: bool = True,
    run_one: RunOne | None = None,
    backend: SandboxBackend | None = None,
    model: Model | None = None,
) -> EvalOutcome:
    """Run the task set and write the evaluation directory; returns its summary.

    `run_one` (default `ooda.agent.app.run.run_task`), `backend` and `model` can be given by the
    caller (tests); otherwise the backend comes from `--sandbox` and the model from
    `--model` and both are closed at the end."""
    options.validate()
    eval_id = options.eval_id or default_eval_id(options)
    eval_dir = options.run.runs_dir / eval_id
    refs = load_refs(options, eval_dir / WORK_DIR)
    _check_model_inputs(options, refs)
    config = _config(options, eval_id, refs)
    results, previous_wall = _check_dir(eval_dir, config, options)
    todo = [r for r in refs if r.id not in results]
    if run_one is None:
        from ooda.agent.app.run import run_task

        run_one = run_task
    console = console or Console(stderr=True)
    task_options = dataclasses.replace(
        options.run, runs_dir=eval_dir / TASKS_DIR, concurrency=options.model_requests()
    )
    with contextlib.ExitStack() as stack:
        if todo:  # resources first: a missing sandbox leaves the directory untouched
            if backend is None:
                from ooda.agent.app.run import open_backend

                backend = open_backend(options.run.sandbox)
                stack.callback(backend.close)
            if model is None and options.run.model != "gold":
                model = stack.enter_context(_shared_model(task_options, refs))
        _open_dir(eval_dir, config, results, resuming=bool(results) or options.resume)
        state = _State(config, results, previous_wall)
        with _progress(console, show_progress, eval_id, len(refs), len(results)) as bar:
            bar.note(list(results.values()))

            def work(ref: TaskRef) -> None:
                record = _run_ref(ref, task_options, eval_dir, run_one, model, backend)
                bar.note(_finish(eval_dir, state, record))

            with ThreadPoolExecutor(max_workers=options.concurrency,
                                    thread_name_prefix="ooda-eval") as pool:
                futures = [pool.submit(work, ref) for ref in todo]
                try:
                    for fut in futures:
                        fut.result()
                except BaseException:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
    summary = write_outputs(eval_dir, config, list(state.results.values()), state.wall_s(),
                            _patch_cache(eval_dir, state))
    finished = [r for r in state.results.values() if r["status"] != "error"]
    if todo and state.results and not finished:
        first = next(iter(state.results.values()))
        raise InfraError(
            f"every task ended in an infrastructure error (first, {first['task_id']}: "
            f"{first.get('reason', '')}); see {eval_dir}; rerun with --resume --retry-errors"
        )
    return EvalOutcome(eval_dir, summary, len(todo), len(refs) - len(todo))


def _check_model_inputs(options: EvalOptions, refs: Sequence[TaskRef]) -> None:
    if options.run.model == "gold":
        missing = [r.id for r in refs if not r.has_gold]
        if missing:
            raise UsageError(f"--model gold: {len(missing)} task(s) have no gold patch "
                             f"(first: {missing[0]})")
    if options.run.model == "replay":
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
            "sandbox": options.run.sandbox,
            "verify_concurrency": options.run.verify_concurrency,
        },
        "concurrency": options.concurrency,
        "requests": options.model_requests(),
        "repos_dir": str(options.repos_dir.resolve()) if options.repos_dir else None,
        "price_prompt": options.price_prompt,
        "price_completion": options.price_completion,
        "task_ids": [r.id for r in refs],
    }


def _check_dir(eval_dir: Path, config: dict[str, Any],
               options: EvalOptions) -> tuple[dict[str, dict[str, Any]], float]:
    """Check (read-only) that the evaluation directory may be used; returns the records of
    the tasks already finished and the wall-clock seconds earlier invocations spent."""
    if eval_dir.exists() and not eval_dir.is_dir():
        raise UsageError(f"{eval_dir}: exists and is not a directory")
    started = (eval_dir / RESULTS_FILE).exists() or (
        (eval_dir / TASKS_DIR).is_dir() and any((eval_dir / TASKS_DIR).iterdir())
    )
    occupied = started or (
        eval_dir.is_dir() and any(p.name != EVAL_FILE and p.name != TASKS_DIR
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
    previous_wall = float((read_json(eval_dir / SUMMARY_FILE) or {}).get("wall_s") or 0.0)
    return results, previous_wall


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
                _remove(run_dir)
    _remove(eval_dir / WORK_DIR)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        fstree.remove_tree(path)
    elif path.exists() or path.is_symlink():
        path.unlink(missing_ok=True)


def _cleanup_leftovers() -> None:
    """Remove sandbox containers a crashed earlier invocation left behind."""
    try:
        from ooda.agent.sandbox.registry import cleanup_leftovers
    except ImportError:
        return
    with contextlib.suppress(Exception):  # best effort: a missing engine is no reason to stop
        cleanup_leftovers()


@contextlib.contextmanager
def _shared_model(options: RunOptions, refs: Sequence[TaskRef]) -> Iterator[Model]:
    """One model for all tasks; for "replay", one bundled endpoint over every task's script."""
    from ooda.agent.models.openai_model import ModelConfig, OpenAIModel

    if options.model == "replay":
        from ooda.agent.models.server import ReplayServer

        scripts = [r.replay for r in refs if r.replay is not None]
        with ReplayServer(scripts, tokens_per_s=options.replay_tokens_per_s) as server:
            config = ModelConfig(name="replay", base_url=server.start(), api_key="ooda-local",
                                 temperature=options.temperature,
                                 concurrency=options.concurrency)
            yield OpenAIModel(config)
        return
    from ooda.agent.app.run import open_model

    if not refs:
        raise UsageError("empty task set")
    # open_model only looks at the task for "gold" and "replay", handled elsewhere
    with open_model(options, _placeholder_task()) as model:
        yield model


def _placeholder_task() -> Task:
    from ooda.tasks.loader import Task

    return Task(id="eval", statement="", repo=Path("."))


def _run_ref(ref: TaskRef, options: RunOptions, eval_dir: Path, run_one: RunOne,
             shared_model: Model | None, backend: SandboxBackend | None) -> dict[str, Any]:
    """Run one task and return its results.jsonl record; never raises for the task's own
    failures (they become status "error")."""
    started = time.monotonic()
    run_dir = eval_dir / TASKS_DIR / ref.id
    _remove(run_dir)
    try:
        task = ref.load()
        model = shared_model
        if model is None:
            from ooda.agent.models.gold import GoldModel

            model = GoldModel(task.gold_patch, task.id)
        result, log = run_one(task, options, console=None, show_progress=False, model=model,
                              backend=backend, run_id=ref.id)
        record = run_record(ref.id, str(result.status), dict(result.summary), Path(log.dir),
                            eval_dir)
    except (InfraError, UsageError) as exc:
        record = error_record(ref.id, _one_line(exc), time.monotonic() - started, run_dir,
                              eval_dir)
    except Exception as exc:  # a bug in one task's run must not sink the evaluation
        record = error_record(ref.id, f"internal error: {type(exc).__name__}: {_one_line(exc)}",
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
        write_outputs(eval_dir, state.config, records, state.wall_s(),
                      _patch_cache(eval_dir, state))
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


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return (lines[0] if lines else type(exc).__name__)[:300]


# --------------------------------------------------------------------------- progress


class _Bar:
    """A rich progress bar over tasks (resolved / errors, elapsed, ETA), or nothing."""

    def __init__(self, progress: Any, task: Any) -> None:
        self.progress = progress
        self.task = task
        self._lock = threading.Lock()

    def note(self, values: list[dict[str, Any]]) -> None:
        if self.progress is None:
            return
        with self._lock:
            resolved = sum(1 for r in values if r["status"] == "resolved")
            errors = sum(1 for r in values if r["status"] == "error")
            self.progress.update(self.task, completed=len(values),
                                 score=f"resolved {resolved}" + (f", errors {errors}"
                                                                 if errors else ""))


@contextlib.contextmanager
def _progress(console: Console, enabled: bool, eval_id: str, total: int,
              done: int) -> Iterator[_Bar]:
    if not enabled:
        yield _Bar(None, None)
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[score]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        console=console,
        transient=False,
    )
    with progress:
        task = progress.add_task(eval_id, total=total, completed=done, score="")
        yield _Bar(progress, task)
