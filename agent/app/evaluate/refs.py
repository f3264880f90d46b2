"""The task set of `ooda eval` as TaskRefs: loaded when their turn comes (SWE-bench repositories
are exported then), `--only` applied."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.app.evaluate.options import EvalOptions
from ooda.agent.app.evaluate.records import remove_path
from ooda.agent.contracts.errors import UsageError
from ooda.tasks.importers.swebench import materialize, missing_commits, read_instances
from ooda.tasks.loader import Task, load_taskset


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
    if options.repos_dir is None:
        raise UsageError(
            f"{options.taskset}: SWE-bench instances need --repos-dir DIR "
            "(local clones named owner__name)"
        )
    if not options.repos_dir.is_dir():
        raise UsageError(f"--repos-dir {options.repos_dir}: not a directory")
    instances = read_instances(options.taskset, options.only)
    problems = missing_commits(instances, options.repos_dir)  # such a task is an error alone
    repos_dir = options.repos_dir
    refs = []
    for inst in instances:
        where = work_dir / inst.instance_id
        refs.append(TaskRef(
            inst.instance_id,
            load=functools.partial(_unexportable, problems[inst.instance_id])
            if inst.instance_id in problems
            else functools.partial(materialize, inst, repos_dir, where),
            release=functools.partial(remove_path, where),
            has_gold=True,
        ))
    return refs


def _unexportable(reason: str) -> Task:
    raise UsageError(reason)


def _check_only(ids: Sequence[str], only: Sequence[str] | None) -> list[str]:
    if not only:
        return list(ids)
    missing = [i for i in only if i not in ids]
    if missing:
        raise UsageError(f"--only {missing[0]}: no such task in the task set")
    return list(only)

