"""Running pytest in the sandbox under the guard, and what a run yields (per-test outcomes
from its JUnit XML report, parsed by parse.py; graded by grade.py).

Pinned runner: pytest starts under the guard, verifiers/pytest_check/guard/ (`python3 -s -B`: no
user site, no bytecode), with plugin autoload off, PYTEST_ADDOPTS empty and the cache plugin off; the
configuration files come from the trusted base (the edit policy). The report is written inside
the workspace (`.ooda/junit-<random>.xml`, a directory no patch may touch, emptied before each
run). The guard's own record of the run and a fingerprint of the files that decide how tests
run are cross-checked with the report (verifiers/pytest_check/integrity.py): a run the code
under test tampered with fails, whatever the report says, and is never retried.
Passing asserts reach the guard's probes (an operand that equals anything) through the calls
its rewriter puts in each comparison (guard/beforehand.py), not through pytest's pass path, so
pytest builds no explanation for them, as without the guard.

A test command is run only when it is a plain pytest call (`pytest_command`; `not_gradable`
says why another is refused): a shell command's exit status alone proves nothing, since code
under test can end the process with status 0.

With the task's pre-test commands (`pre_test`, verifiers/pretest.py), pytest runs as the last
step of a bash script that runs them first; one that fails raises PreTestFailed (one line)
instead of a run whose missing report would say nothing of why.

The runs on the unpatched code (which tests fail, which pass) go through verifiers/runners/'
`base_run`, with this as pytest's runner (runners/pytest_runner.py).
"""

from __future__ import annotations

import functools
import json
import os
import re
import secrets
import shlex
import stat
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.support.fstree import remove_workspace
from ooda.verifiers import pretest, tail
from ooda.verifiers.pytest_check import integrity
from ooda.verifiers.pytest_check.parse import (
    REPORT_DIR,
    TestRun,
    ids_not_found,
    normalize_id,
    parse_report,
    read_report,
    run_target,
)

ARGS_FILE_THRESHOLD = 400
"""Above this many ids, they go to pytest in an @argsfile instead of on the command line."""
PYTEST_ENV = {
    "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
    "PYTEST_ADDOPTS": "",
    "PYTHONDONTWRITEBYTECODE": "1",
}
SESSION_RAN = frozenset({0, 1, 2, 5})
"""pytest.main exit codes after which the JUnit report has been written (the session ran)."""

_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_SHELL_CHARS = set("|&;<>()$`\\\n*?")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class TestRunError(Exception):
    """A test run that produced no usable report (timeout, crash, usage error)."""

    __test__ = False

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out
        """The run hung past its timeout (on a base, code that loops: not a broken task)."""


class PreTestFailed(TestRunError):
    """A pre-test command of the task failed, so its tests did not run (the environment's
    doing, not the code under test's: the message names the command)."""



def _reset_report_dir(workspace: Path) -> Path:
    """Remove whatever sits at .ooda (planted reports, a link) so only this run writes there."""
    directory = workspace / REPORT_DIR
    try:
        info = os.lstat(directory)
    except FileNotFoundError:
        return directory
    if stat.S_ISDIR(info.st_mode):
        remove_workspace(directory)
    else:
        directory.unlink()
    return directory


GUARD_PACKAGE = "_ooda_guard"
"""The guard's package name inside the sandbox (its modules import one another relatively)."""
ARGS_FILE_TOKEN = "--ooda-args-file="
"""How run_pytest hands the guard's launcher a file of pytest arguments (one a line): the
launcher reads it itself, so every pytest version gets the ids (pytest reads `@file` only
since 8.2; before, it took `@...` for a path and ran nothing)."""
GUARD_LAUNCHER = f"""\
\"\"\"Starts ooda's pytest guard: the package {GUARD_PACKAGE}/ next to this file.\"\"\"
import sys

from {GUARD_PACKAGE}.main import main

args = []
for arg in sys.argv[1:]:
    if arg.startswith({ARGS_FILE_TOKEN!r}):
        with open(arg[{len(ARGS_FILE_TOKEN)}:], encoding="utf-8") as listed:
            args += listed.read().splitlines()
    else:
        args.append(arg)
main(args)
"""


@functools.cache
def guard_sources() -> dict[str, str]:
    """The guard package's modules: file name -> source (what install_guard writes, and what
    a sandbox's warm interpreter may hold imported: agent/verify/verifier.py)."""
    # read by path, not imported: importing them would import pytest on the host (~0.1 s of
    # every ooda start-up) for a program that only ever runs inside the sandbox
    package = Path(__file__).with_name("guard")
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(package.glob("*.py"))}


def install_guard(directory: Path, name: str) -> str:
    """Write the guard into `directory` (a report directory no patch may touch): its package
    as `_ooda_guard/` and the launcher script `name`, which runs it with the package found next
    to it (the script's directory is first on sys.path). Returns `name`."""
    package = directory / GUARD_PACKAGE
    package.mkdir(exist_ok=True)
    for module, text in guard_sources().items():
        (package / module).write_text(text, encoding="utf-8")
    (directory / name).write_text(GUARD_LAUNCHER, encoding="utf-8")
    _own_like(package, directory)  # the sandbox user may empty .ooda/, as before the split
    return name


def _own_like(path: Path, model: Path) -> None:
    """Give `path` (not followed) `model`'s owner when running as root."""
    info = model.stat()
    if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
        os.chown(path, info.st_uid, info.st_gid, follow_symlinks=False)


def _report_dir(workspace: Path) -> Path:
    """A fresh .ooda/, owned like the workspace root (the sandbox user writes its reports)."""
    directory = _reset_report_dir(workspace)
    directory.mkdir(mode=0o755)
    _own_like(directory, workspace)
    return directory


def fresh_report_dir(workspace: Path) -> Path:
    """An empty .ooda/ for a run's reports and records (also the output-graded runners')."""
    return _report_dir(workspace)


def reset_report_dir(workspace: Path) -> None:
    """.ooda/ removed once a run's reports were read."""
    _reset_report_dir(workspace)


@dataclass(frozen=True)
class Watched:
    """What the guard watches in a run: the files the candidate changed (`changed_lines`:
    path, first and last line of each changed range) and the task's hidden test files, whose
    reads by the candidate's code it reports."""

    changed_files: Sequence[str] = ()
    hidden_files: Sequence[str] = ()
    changed_lines: Sequence[tuple[str, int, int]] = ()


def run_pytest(
    sandbox: Sandbox,
    args: Sequence[str],
    timeout_s: float,
    *,
    env: Mapping[str, str] | None = None,
    known_files: Sequence[str] = (),
    pre_test: Sequence[str] = (),
    watched: Watched = Watched(),
    stop_at_failure: bool = False,
) -> TestRun:
    """Run pytest under the guard with `<report flags> <args>` in the sandbox, read its
    report and check the run for tampering (`watched.changed_files`: what the candidate
    changed); the task's `pre_test` commands run first, in the same shell (PreTestFailed when
    one fails). The guard reports which of `watched.hidden_files` (the task's hidden tests) the
    candidate's code read (TestRun.hidden_reads). `stop_at_failure` (with -x, verdict only):
    the guard may end the run at its first failure, unsigned (TestRun.stopped_at)."""
    before = integrity.manifest(sandbox.workspace, known_files)
    directory = _report_dir(sandbox.workspace)
    nonce = uuid.uuid4().hex
    name = f"junit-{nonce}.xml"
    workdir = sandbox.workdir.rstrip("/") or "/"
    in_dir = PurePosixPath(workdir) / REPORT_DIR
    install_guard(directory, f"guard-{nonce}.py")
    lines: dict[str, list[tuple[int, int]]] = {}
    for path, first, last in watched.changed_lines:
        lines.setdefault(path, []).append((first, last))
    key = secrets.token_bytes(32)
    config = {"changed_files": list(watched.changed_files),
              "hidden_files": list(watched.hidden_files),
              "changed_lines": lines, "key": key.hex(), "stop_at_failure": stop_at_failure}
    (directory / f"guard-{nonce}.json").write_text(json.dumps(config), encoding="utf-8")
    args = list(args)
    if len(args) > ARGS_FILE_THRESHOLD:
        args_name = f"args-{nonce}.txt"
        (directory / args_name).write_text("\n".join(args) + "\n", encoding="utf-8")
        args = [ARGS_FILE_TOKEN + str(in_dir / args_name)]
    argv = [
        "python3",
        "-s",
        "-B",
        str(in_dir / f"guard-{nonce}.py"),
        str(in_dir / f"record-{nonce}.json"),
        str(in_dir / f"guard-{nonce}.json"),
        "-p",
        "no:cacheprovider",
        "-o",
        "junit_family=xunit1",
        f"--junitxml={in_dir / name}",
        f"--rootdir={workdir}",
        "--continue-on-collection-errors",
        "-q",
        *args,
    ]
    wrapped, marker = pretest.wrap(argv, pre_test, PYTEST_ENV)
    result = sandbox.run(wrapped, timeout_s=max(timeout_s, 0.1), env={**PYTEST_ENV, **(env or {})})
    failed = None if result.timed_out else pretest.failure(result.output, pre_test, marker)
    if failed:
        _reset_report_dir(sandbox.workspace)
        raise PreTestFailed(f"{failed}:\n{tail(result.output, 1500)}")
    data = None if result.timed_out else read_report(sandbox.workspace, name)
    run = parse_report(data, known_files, sandbox.workspace) if data is not None else None
    run = run or TestRun()
    run.exit_code = result.exit_code
    run.timed_out = result.timed_out
    run.output = result.output
    run.duration_s = result.duration_s
    run.limit = result.limit
    run.commands += [*(f"(pre-test) {c}" for c in pre_test), shlex.join(argv)]
    if not result.timed_out:
        record = integrity.parse_record(read_report(sandbox.workspace, f"record-{nonce}.json"),
                                        key)
        run.pytest_exit_code = record["exit_code"] if record is not None else None
        if record is not None:
            run.hidden_reads = [str(p) for p in record.get("hidden_reads", [])][:10]
        elif stop_at_failure:
            stop = stopped_at(read_report(sandbox.workspace, stopped_name(name)), run)
            if stop is not None:
                run.stopped_at, reads = stop
                run.hidden_reads = reads
        changes = integrity.changed_files(
            before, integrity.manifest(sandbox.workspace, known_files))
        if changes:
            run.tampered.append(integrity.describe_files(changes))
        if run.report_found and run.stopped_at is None:
            run.tampered += integrity.cross_check(record, run.cases, result.exit_code)
        elif record is not None and record["exit_code"] in SESSION_RAN:
            run.tampered.append(
                "pytest finished its session (so it wrote its JUnit report) but the report is "
                "missing or unreadable: deleted or overwritten by the code under test?"
            )
    _reset_report_dir(sandbox.workspace)
    return run


def stopped_name(junit_name: str) -> str:
    """The guard's early-stop marker beside the JUnit report `NAME.xml`: `stopped-NAME.json`
    (guard/early.py's `marker_path`)."""
    return f"stopped-{junit_name.removesuffix('.xml')}.json"


def stopped_at(marker: bytes | None, run: TestRun) -> tuple[str, list[str]] | None:
    """The test a run ended at by the guard's early stop (guard/early.py) and the hidden test
    files read by then, when its marker names a test the JUnit report has failing and the
    process exited 1 as pytest -x does; None otherwise (the missing record is then tampering).
    Whoever wrote the marker, it can only fail the run: a run stopped early is never judged
    passed (tests_stage.py)."""
    if marker is None or not run.report_found or run.exit_code != 1:
        return None
    try:
        found = json.loads(marker.decode("utf-8"))
        node, reads = found.get("nodeid"), found.get("hidden_reads", [])
    except (ValueError, UnicodeDecodeError, AttributeError):
        return None
    if not isinstance(node, str) or run.outcomes.get(node) not in ("failed", "error"):
        return None
    if not isinstance(reads, list):
        return None
    return node, [str(p) for p in reads][:10]


def run_pytest_ids(
    sandbox: Sandbox,
    ids: Sequence[str],
    timeout_s: float,
    options: Sequence[str] = (),
    *,
    whole_files: bool = False,
    pre_test: Sequence[str] = (),
    watched: Watched = Watched(),
) -> TestRun:
    """Run exactly these node ids, in this order (`options`, e.g. -x, go first); a truncated
    parametrized id runs its whole function (parse.run_target), and with `whole_files` each
    id's file runs whole (as SWE-bench's harness runs them: a test may depend on an earlier one
    of its file), the ids being graded from it. Ids pytest cannot find are noted and the run is
    repeated without them (one missing id would otherwise stop pytest from running any); a run
    that was tampered with is never repeated."""
    deadline = time.monotonic() + timeout_s
    if whole_files:
        wanted = list(dict.fromkeys(normalize_id(i).split("::", 1)[0] for i in ids))
    else:
        wanted = list(dict.fromkeys(run_target(i) for i in ids))
    known = list(dict.fromkeys(i.split("::", 1)[0] for i in wanted))
    not_found: list[str] = []
    extra: list[str] = []
    commands: list[str] = []
    carried: dict[str, str] = {}
    messages: dict[str, str] = {}
    for _attempt in range(3):
        run = run_pytest(
            sandbox,
            [*options, *extra, *wanted],
            deadline - time.monotonic(),
            known_files=known,
            pre_test=pre_test,
            watched=watched,
            stop_at_failure="-x" in options,
        )
        commands += run.commands
        if run.timed_out or run.exit_code != 4 or run.pytest_exit_code != 4 or run.tampered:
            break  # only pytest's own usage error is worth another run
        missing = ids_not_found(run.output, sandbox.workdir, wanted)
        if missing:
            # keep what the first run learnt about them (a collection error, say)
            not_found += missing
            wanted = [i for i in wanted if i not in missing]
            carried.update(run.outcomes)
            messages.update(run.messages)
        elif not extra and not run.outcomes and "unrecognized arguments" in run.output:
            # the repository's addopts need a plugin that is not loaded: drop them
            extra = ["-o", "addopts="]
        else:
            break
        if not wanted or time.monotonic() >= deadline:
            break
    for node, outcome in carried.items():
        run.outcomes.setdefault(node, outcome)
    for node, message in messages.items():
        run.messages.setdefault(node, message)
    run.not_found = not_found
    run.commands = commands
    return run


def pytest_command(cmd: str) -> tuple[list[str], dict[str, str]] | None:
    """(pytest arguments, environment) when `cmd` is a plain pytest invocation
    (`pytest ...`, `python -m pytest ...`, optionally after VAR=value), else None."""
    if any(ch in _SHELL_CHARS for ch in cmd):
        return None
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    env: dict[str, str] = {}
    while words and _ENV_ASSIGN.match(words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[:1] in (["pytest"], ["py.test"]):
        args = words[1:]
    elif len(words) >= 3 and _PYTHON.match(words[0]) and words[1:3] == ["-m", "pytest"]:
        args = words[3:]
    else:
        return None
    drop = ("--junitxml", "--junit-xml", "--junitprefix", "--junit-prefix")
    return [a for a in args if not a.startswith(drop)], env


def not_gradable(cmd: str) -> str:
    """Why a test command that is not a plain pytest run is refused: its exit status alone
    proves nothing (code under test can end the process with status 0)."""
    return (
        f"the test command {cmd!r} is not a plain pytest invocation (`pytest ARGS` or "
        "`python -m pytest ARGS`, optionally after VAR=value; no shell operators): ooda grades "
        "tests per test from pytest's own report, never by a command's exit status alone"
    )
