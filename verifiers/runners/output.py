"""`OutputRunner`: a test runner graded from its console output (Django's runtests.py, sympy's
bin/test: they write no JUnit report). One is its kind, its id format, its default command line,
the arguments a request gives it and a parser of its output's lines; the rest is shared: the
command line (VAR=value words in front become the environment), the task's pre-test commands
first in the same shell (PreTestFailed when one fails), the run and its outcomes.

No printed line decides a verdict: the runner's script runs under a recording harness
(harness.py) that keeps each test's outcome from the runner's own calls (unittest's TestResult
under Django's runner, sympy's reporter) and writes it, at the end, to a file whose name the code
under test cannot know; the record is cross-checked with the exit status, and the files that
decide how tests run are fingerprinted around the run as for pytest (docs/SECURITY.md).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers import pretest, tail
from ooda.verifiers.pytest_check import integrity
from ooda.verifiers.pytest_check.parse import REPORT_DIR, TestRun, read_report
from ooda.verifiers.pytest_check.run import PreTestFailed, fresh_report_dir, reset_report_dir
from ooda.verifiers.runners.request import NotGradable, TestRequest


def command(runner_cmd: str, arguments: list[str]) -> tuple[list[str], dict[str, str]]:
    """(argv, environment) of `runner_cmd` with `arguments` after it; VAR=value words in front
    of the command become the environment."""
    words = shlex.split(runner_cmd)
    env: dict[str, str] = {}
    while words and re.match(r"^[A-Za-z_]\w*=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    return ["python3", *words, *arguments], env


HARNESS_KINDS = {"django": "unittest", "sympy": "sympy"}
"""How the recording harness follows each output-graded runner (harness.py)."""


@functools.cache
def harness_source() -> str:
    """The harness's text (never imported on the host: it runs on the environment's Python)."""
    return Path(__file__).with_name("harness.py").read_text(encoding="utf-8")


def run_graded(sandbox: Sandbox, request: TestRequest, kind: str, argv: list[str],
               env: dict[str, str], outcomes: Callable[[str], dict[str, str]]) -> TestRun:
    """Run `argv` (python3 SCRIPT ARGS...) in `sandbox` under the recording harness (the
    request's pre-test commands first) and grade each test from the harness's record, cross-
    checked with the exit status; the printed lines (`outcomes` parses them) decide nothing."""
    if request.command and not request.ids:
        raise NotGradable(f"the {kind} test runner runs the task's test ids; a test command "
                          "is graded only when it is a plain pytest call")
    workspace = sandbox.workspace
    directory = fresh_report_dir(workspace)
    in_dir = PurePosixPath(sandbox.workdir.rstrip("/") or "/") / REPORT_DIR
    setup, record_name = secrets.token_hex(8), f"record-{secrets.token_hex(16)}.json"
    key = secrets.token_bytes(32)
    (directory / f"harness-{setup}.py").write_text(harness_source(), encoding="utf-8")
    (directory / f"harness-{setup}.json").write_text(
        json.dumps({"record": str(in_dir / record_name), "key": key.hex(),
                    "changed_lines": [[str(PurePosixPath(sandbox.workdir) / path), first, last]
                                      for path, first, last in request.changed_lines]}),
        encoding="utf-8")
    harnessed = [argv[0], str(in_dir / f"harness-{setup}.py"), str(in_dir / f"harness-{setup}.json"),
                 HARNESS_KINDS.get(kind, "unittest"), *argv[1:]]
    if kind == "sympy" and "PYTHONHASHSEED" not in env:
        # bin/test then runs the tests in its own process (not a child it would start to
        # randomize hashing), with hashing randomized as that child's would be
        env = {**env, "PYTHONHASHSEED": str(secrets.randbelow(2**32))}
    before = integrity.manifest(workspace, request.test_files)
    wrapped, nonce = pretest.wrap(harnessed, request.pre_test)
    result = sandbox.run(wrapped, timeout_s=max(request.timeout_s, 0.1), env=env)
    failed = None if result.timed_out else pretest.failure(result.output, request.pre_test,
                                                           nonce)
    if failed:
        reset_report_dir(workspace)
        raise PreTestFailed(f"{failed}:\n{tail(result.output, 1500)}")
    record = None if result.timed_out else _record(read_report(workspace, record_name), key)
    found = dict(record["tests"]) if record is not None else {}
    commands = [*(f"(pre-test) {c}" for c in request.pre_test), shlex.join(argv)]
    run = TestRun(outcomes=found, exit_code=result.exit_code, timed_out=result.timed_out,
                  report_found=record is not None, output=result.output,
                  duration_s=result.duration_s, commands=commands, limit=result.limit)
    if not result.timed_out and result.limit is None:
        # files the tests create are theirs (Django's and sympy's suites write some): only an
        # existing test file changed or deleted mid-run is tampering here (read before use)
        changes = [c for c in integrity.changed_files(
            before, integrity.manifest(workspace, request.test_files)) if "(created)" not in c]
        if changes:
            run.tampered.append(integrity.describe_files(changes))
        run.tampered += cross_check(record, result.exit_code)
    reset_report_dir(workspace)
    return run


def _record(data: bytes | None, key: bytes) -> dict[str, Any] | None:
    """The harness's record, or None when it is missing, not what the harness writes or not
    signed with the run's `key`."""
    if data is None:
        return None
    mac, _, body = data.partition(b"\n")
    if not hmac.compare_digest(mac, hmac.new(key, body, hashlib.sha256).hexdigest().encode()):
        return None
    try:
        record = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    if (
        not isinstance(record, dict)
        or not isinstance(record.get("tests"), dict)
        or not isinstance(record.get("exit_code"), int)
        or not isinstance(record.get("failures"), int)
        or not isinstance(record.get("problems"), list)
    ):
        return None
    record["tests"] = {str(k): str(v) for k, v in record["tests"].items()
                       if str(v) in _OUTCOMES}
    return record


_OUTCOMES = frozenset({"passed", "failed", "error", "skipped", "xfailed"})


def cross_check(record: dict[str, Any] | None, exit_code: int | None) -> list[str]:
    """Why the run's record cannot be trusted (empty when it can): missing (the process ended
    before the runner did), an exit status other than the runner's, failures the runner
    reported with a status of 0 (or, under unittest, a failed run whose record holds no failing
    test), the runner's own functions (and sys.exit) replaced at run time."""
    if record is None:
        return ["the test process ended before the test runner finished (os._exit or a crash "
                "in the code under test?): its record of the run is missing (or not signed by "
                "the harness)"]
    problems = [f"{name} (the test runner's) was replaced at run time"
                for name in map(str, record["problems"][:5])]
    problems += [f"an assertion was about to compare a {name}, whose comparison was made by the "
                 "code under test, and it said it equals a value it was never given (it decides "
                 "by what it meets, not by its value)"
                 for name in map(str, list(record.get("decided") or [])[:5])]
    if exit_code is not None and record["exit_code"] != exit_code:
        problems.append(f"the test runner ended with status {record['exit_code']} but the test "
                        f"process exited with {exit_code}")
    if record["failures"] and record["exit_code"] == 0:
        problems.append(f"the test runner reported {record['failures']} failure(s) but ended "
                        "with status 0")
    failing = any(outcome in ("failed", "error") for outcome in record["tests"].values())
    if record.get("kind") == "unittest" and not failing and (
            record["failures"] or record["exit_code"] != 0):
        # each failure unittest reports is noted for its test: a runner that failed with no
        # failing test in the record had its record changed in memory (held-out batch 5's U3)
        problems.append(f"the test runner ended with status {record['exit_code']} after "
                        f"{record['failures']} failure(s) but its record holds no failing test")
    return problems


@dataclass
class OutputRunner:
    """A runner graded from its console output (the TestRunner protocol)."""

    kind: str
    id_format: str
    default_cmd: str
    """Its command line when the environment gives none (`runner.test_cmd`)."""
    arguments: Callable[[TestRequest], list[str]]
    """What follows the command for a request (labels, files)."""
    outcomes: Callable[[str], dict[str, str]]
    """Test id -> outcome, from the run's output."""
    exit_status_checked: bool = False
    stops_at_first_failure: bool = False

    def command(self, request: TestRequest) -> tuple[list[str], dict[str, str]]:
        """(argv, environment) that run `request`."""
        return command(request.runner_cmd or self.default_cmd, self.arguments(request))

    def run(self, sandbox: Sandbox, request: TestRequest) -> TestRun:
        argv, env = self.command(request)
        return run_graded(sandbox, request, self.kind, argv, env, self.outcomes)

    def collection_errors(self, run: TestRun) -> list[str]:
        """Its output names tests only."""
        return []
