"""Load a task directory (`task.toml` + `repo/`) into a `Task`. Pure: reads files, nothing else.

task.toml keys (SPEC.md): `id`, `statement` | `statement_file`, `repo`, `fail_to_pass`,
`pass_to_pass`, `gold_patch`, `test_patch`, and the `[verifiers]` table (`ruff`, `mypy`,
`timeout_s`). Extensions of ours, all optional:

- `[verifiers] security = false` turns the security stage off; `security_rules = ["S602",
  "S5"]` sets the ruff `S` rules it checks (the secret scan always runs while it is on).

- `test_cmd = "python -m pytest -q"`: a pytest command, used when there are no node ids. It
  must be a plain pytest call (`pytest ARGS` or `python -m pytest ARGS`, optionally after
  VAR=value): tests are graded per test from pytest's report, never by exit status alone.
- `protected = ["pkg/helpers.py", "pkg/fixtures/"]`: test support files the candidate may not
  edit, in .gitignore syntax, on top of the files protected by rule (agent/support/testsupport.py);
  a `!pattern` lets the candidate edit a file the rule would protect.
- `requirements = "requirements.txt"`: third-party packages the repo needs; the path is
  looked up relative to the task directory first, then relative to the repo. Without the key,
  a `requirements.txt` in the task directory is used when present.
- `[environment]`: the image the tests run in, built once per content hash (Python, Debian
  and pip packages, the repository's own install, the test runner and its plugins; see
  tasks/environment.py). Such a task's ruff, security and mypy stages are off unless
  `[verifiers]` turns them on: the environment's Python and tools are the repository's, not
  ooda's (ooda's ruff and mypy are not in it).
- `replay = "replay.jsonl"`: scripted answers for the bundled endpoint; default `replay.jsonl`
  in the task directory when present.

Every path in task.toml is relative and must stay inside the task directory (checked on the
path's text: no absolute paths, no `..` climbing out; a symlink inside the directory is
followed as it is).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.stages import task_keys
from ooda.tasks.environment import environment_of
from ooda.tasks.fields import (
    check_keys,
    check_test_id,
    inside,
    opt_str,
    read_text,
    read_toml,
    str_list,
    type_error,
)
from ooda.tasks.verifier_options import VerifierOptions, check_verifier_values, verifier_options

__all__ = [
    "Task",
    "VerifierOptions",
    "check_test_cmd",
    "is_task_dir",
    "load_task",
    "load_taskset",
    "task_from_repo",
]


@dataclass(frozen=True)
class Task:
    """One thing to fix: a repository in its broken state and what must pass afterwards.
    Frozen: a changed task is a new one (`dataclasses.replace`)."""

    id: str
    """Task id (default: the task directory's name)."""
    statement: str
    """What to do, as given to the model."""
    repo: Path
    """The code in its broken state (never modified by ooda)."""
    fail_to_pass: list[str] = field(default_factory=list)
    """pytest node ids (or files) that fail now and must pass."""
    pass_to_pass: list[str] = field(default_factory=list)
    """pytest node ids (or files) that must keep passing."""
    gold_patch: str | None = None
    """Reference fix (unified diff text), if known."""
    test_patch: str | None = None
    """Hidden tests (unified diff text) applied only when verifying."""
    verifiers: VerifierOptions = field(default_factory=VerifierOptions)
    """Which verifiers run and their timeout."""
    test_cmd: str | None = None
    """Shell test command for plain repositories (used when no node ids are given)."""
    requirements: Path | None = None
    """A requirements file of third-party packages the repo needs in the sandbox."""
    root: Path | None = None
    """The task directory, when the task came from one."""
    replay: Path | None = None
    """Scripted answers (replay.jsonl) for the bundled endpoint, when the task ships them."""
    protected: list[str] = field(default_factory=list)
    """Test support files a candidate may not edit (.gitignore patterns, `!` to allow one),
    on top of those protected by rule (agent/support/testsupport.py)."""
    run_test_files: bool = False
    """Run the test files of fail_to_pass/pass_to_pass whole, grading the listed ids (as
    SWE-bench's harness does; task.toml `run_test_files = true`)."""
    environment: dict[str, Any] | None = None
    """The image the tests run in (task.toml's [environment] table, an EnvSpec's fields,
    see tasks/environment.py); None: ooda's own image."""


TASK_FILE = "task.toml"
"""The file that makes a directory a task directory."""

TOP_KEYS = (
    "id",
    "statement",
    "statement_file",
    "repo",
    "fail_to_pass",
    "pass_to_pass",
    "gold_patch",
    "test_patch",
    "verifiers",
    "test_cmd",
    "requirements",
    "replay",
    "protected",
    "environment",
    "run_test_files",
)
"""Keys allowed at the top level of task.toml."""


_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+@-]*$")


def is_task_dir(path: Path) -> bool:
    """True when `path` is a directory holding a task.toml file."""
    return path.is_dir() and (path / TASK_FILE).is_file()


def load_task(path: Path) -> Task:
    """Read the task directory `path` (holding task.toml) and validate it; UsageError if bad.

    `path` may also name the task.toml file itself.
    """
    if path.name == TASK_FILE and path.is_file():
        path = path.parent
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory")
    toml_path = path / TASK_FILE
    if not toml_path.is_file():
        raise UsageError(
            f"{path}: not a task directory (no {TASK_FILE}); "
            "for a plain repository pass --statement"
        )
    root = path.resolve()
    where = str(toml_path)
    data = read_toml(toml_path)
    check_keys(data, TOP_KEYS, where)

    task_id = opt_str(data, "id", where)
    if task_id is None:
        task_id = root.name
    _check_id(task_id, where)

    statement = _read_statement(data, root, where)
    repo_rel = opt_str(data, "repo", where) or "repo"
    repo = root / inside(repo_rel, "repo", where)
    if not repo.is_dir():
        raise UsageError(f"{where}: repo directory {repo_rel!r} not found in {path}")

    fail_to_pass = str_list(data, "fail_to_pass", where)
    pass_to_pass = str_list(data, "pass_to_pass", where)
    test_cmd = opt_str(data, "test_cmd", where)
    if test_cmd is not None and not test_cmd.strip():
        raise UsageError(f"{where}: 'test_cmd' is empty")
    if test_cmd is not None:
        check_test_cmd(test_cmd, where)
    protected = _protected(data, where)
    if not fail_to_pass and test_cmd is None:
        raise UsageError(f"{where}: nothing to check: give 'fail_to_pass' tests or a 'test_cmd'")

    gold_patch = _read_patch(data, "gold_patch", root, where)
    test_patch = _read_patch(data, "test_patch", root, where)
    verifiers = verifier_options(data.get("verifiers"), where)
    requirements = _requirements(data, root, repo, where)
    replay = _replay(data, root, where)
    environment = environment_of(data.get("environment"), where)
    run_test_files = data.get("run_test_files", False)
    if not isinstance(run_test_files, bool):
        raise type_error("run_test_files", "true or false", run_test_files, where)
    if environment is not None:
        table = data.get("verifiers")
        for key in task_keys():  # ooda's tools are not in the task's own environment
            if not isinstance(table, dict) or key not in table:
                verifiers.switch(key, False)
    return Task(
        id=task_id,
        statement=statement,
        repo=repo,
        fail_to_pass=fail_to_pass,
        pass_to_pass=pass_to_pass,
        gold_patch=gold_patch,
        test_patch=test_patch,
        verifiers=verifiers,
        test_cmd=test_cmd,
        requirements=requirements,
        root=root,
        replay=replay,
        protected=protected,
        environment=environment,
        run_test_files=run_test_files,
    )


def task_from_repo(
    repo: Path,
    *,
    statement: str,
    fail_to_pass: list[str],
    pass_to_pass: list[str],
    test_cmd: str | None,
    verifiers: VerifierOptions,
    task_id: str | None = None,
    requirements: Path | None = None,
) -> Task:
    """Build a task for a plain repository (no task.toml), validated like `load_task`."""
    where = str(repo)
    if not repo.exists():
        raise UsageError(f"{repo}: no such file or directory")
    if not repo.is_dir():
        raise UsageError(f"{repo}: not a directory")
    if not statement.strip():
        raise UsageError(f"{where}: no statement: pass --statement TEXT or --statement-file F")
    repo = repo.resolve()
    if task_id is None:
        task_id = repo.name
    _check_id(task_id, where)
    for name, items in (("fail_to_pass", fail_to_pass), ("pass_to_pass", pass_to_pass)):
        for item in items:
            check_test_id(item, name, where)
    if test_cmd is not None and not test_cmd.strip():
        raise UsageError(f"{where}: the test command is empty")
    if test_cmd is not None:
        check_test_cmd(test_cmd, where)
    if not fail_to_pass and test_cmd is None:
        raise UsageError(f"{where}: nothing to check: pass --fail-to-pass or --test-cmd")
    check_verifier_values(verifiers, where)
    if requirements is not None and not requirements.is_file():
        raise UsageError(f"{where}: requirements file {requirements} not found")
    return Task(
        id=task_id,
        statement=statement,
        repo=repo,
        fail_to_pass=list(fail_to_pass),
        pass_to_pass=list(pass_to_pass),
        verifiers=verifiers,
        test_cmd=test_cmd,
        requirements=requirements.resolve() if requirements is not None else None,
    )


def load_taskset(path: Path) -> list[Task]:
    """Load every task directory directly under `path`, sorted by directory name."""
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    if not path.is_dir():
        raise UsageError(f"{path}: not a directory of task directories")
    if is_task_dir(path):
        raise UsageError(f"{path}: is a single task directory, not a directory of task directories")
    dirs = sorted(
        (p for p in path.iterdir() if not p.name.startswith(".") and is_task_dir(p)),
        key=lambda p: p.name,
    )
    if not dirs:
        raise UsageError(f"{path}: no task directories (subdirectories with {TASK_FILE}) found")
    tasks = [load_task(d) for d in dirs]
    seen: dict[str, Path] = {}
    for task, d in zip(tasks, dirs, strict=True):
        if task.id in seen:
            raise UsageError(f"{d}: task id {task.id!r} already used by {seen[task.id]}")
        seen[task.id] = d
    return tasks


def check_test_cmd(cmd: str, where: str) -> None:
    """UsageError unless `cmd` is a plain pytest call (its tests can be graded one by one)."""
    from ooda.verifiers.pytest_check import not_gradable, pytest_command

    if pytest_command(cmd) is None:
        raise UsageError(f"{where}: {not_gradable(cmd)}")


def _protected(data: dict[str, Any], where: str) -> list[str]:
    patterns = data.get("protected", [])
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise type_error("protected", "a list of path patterns", patterns, where)
    from ooda.agent.support.testsupport import check_patterns

    problem = check_patterns(patterns)
    if problem:
        raise UsageError(f"{where}: 'protected': {problem}")
    return list(patterns)


def _check_id(task_id: str, where: str) -> None:
    if not _ID_RE.match(task_id):
        raise UsageError(
            f"{where}: bad task id {task_id!r} "
            "(use letters, digits and . _ - + @, starting with a letter or digit)"
        )


def _read_statement(data: dict[str, Any], root: Path, where: str) -> str:
    inline = opt_str(data, "statement", where)
    file_rel = opt_str(data, "statement_file", where)
    if inline is not None and file_rel is not None:
        raise UsageError(f"{where}: give 'statement' or 'statement_file', not both")
    if file_rel is not None:
        file = root / inside(file_rel, "statement_file", where)
        if not file.is_file():
            raise UsageError(f"{where}: statement_file {file_rel!r} not found")
        inline = read_text(file, "statement_file", where)
    if inline is None or not inline.strip():
        raise UsageError(f"{where}: no statement: set 'statement' or 'statement_file'")
    return inline


def _read_patch(data: dict[str, Any], key: str, root: Path, where: str) -> str | None:
    rel = opt_str(data, key, where)
    if rel is None:
        return None
    file = root / inside(rel, key, where)
    if not file.is_file():
        raise UsageError(f"{where}: {key} file {rel!r} not found")
    return read_text(file, key, where)


def _requirements(data: dict[str, Any], root: Path, repo: Path, where: str) -> Path | None:
    rel = opt_str(data, "requirements", where)
    if rel is None:
        default = root / "requirements.txt"
        return default if default.is_file() else None
    inner = inside(rel, "requirements", where)
    for base in (root, repo):
        if (base / inner).is_file():
            return base / inner
    raise UsageError(f"{where}: requirements file {rel!r} not found in the task dir or repo")


def _replay(data: dict[str, Any], root: Path, where: str) -> Path | None:
    rel = opt_str(data, "replay", where)
    if rel is None:
        default = root / "replay.jsonl"
        return default if default.is_file() else None
    file = root / inside(rel, "replay", where)
    if not file.is_file():
        raise UsageError(f"{where}: replay file {rel!r} not found")
    return file
