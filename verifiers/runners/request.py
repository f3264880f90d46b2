"""What a test runner is: the `TestRunner` protocol every runner of this package implements,
and the `TestRequest` it is handed (which tests, how long, in which shell).

Apart from the table (runners/__init__.py) so that each runner's module can import it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers.pytest_check.parse import TestRun


class NotGradable(ValueError):
    """A request this runner cannot grade per test (a shell command instead of a plain pytest
    call, a test command given to a runner that runs ids): one line that says why."""


@dataclass(frozen=True)
class TestRequest:
    """The tests to run on the code in a sandbox, and how."""

    __test__ = False

    ids: tuple[str, ...] = ()
    """The test ids to run, the failing ones first (the runner's own form: `id_format`)."""
    command: str | None = None
    """A test command given by the user (a plain repository's `--test-cmd`), when there are no
    ids."""
    runner_cmd: str | None = None
    """The runner's own command line (an environment's `runner.test_cmd`; None: its default)."""
    test_files: tuple[str, ...] = ()
    """The task's test files (those its hidden test patch touches; a blind run's regression
    files)."""
    whole_files: bool = False
    """Run the test files of the ids whole and grade the ids from them (SWE-bench)."""
    timeout_s: float = 60.0
    pre_test: tuple[str, ...] = ()
    """Shell commands run first, in the tests' own shell (verifiers/pretest.py)."""
    changed_files: tuple[str, ...] = ()
    """What the candidate changed (the guard tells its code from the tests' by it)."""
    changed_lines: tuple[tuple[str, int, int], ...] = ()
    """(path, first, last): the lines of a changed file its patch added or changed (a changed
    file with none here: all of it)."""
    stop_at_first_failure: bool = False
    """Only the verdict matters: a runner may stop at the first failing test."""


@runtime_checkable
class TestRunner(Protocol):
    """One kind of test runner: runs a request in a sandbox and reads each test's outcome."""

    kind: str
    """Its name in `[environment.runner] kind` (pytest, django, sympy)."""
    id_format: str
    """What a test id of this runner looks like (for messages and docs)."""
    exit_status_checked: bool
    """Its exit status must agree with its report (a run whose every required test passed but
    that exited non-zero fails): true of pytest under the guard, whose report and record are
    cross-checked; an output-graded runner's status says nothing more than its output."""
    stops_at_first_failure: bool
    """It honours `TestRequest.stop_at_first_failure`: required tests it did not report were
    then not run (after the first failure), not missing."""

    def run(self, sandbox: Sandbox, request: TestRequest) -> TestRun:
        """Run `request` in `sandbox`: per-test outcomes (`report_found` false when it left
        nothing to read them from). Raises NotGradable for a request it cannot grade and
        PreTestFailed (verifiers/pytest_check) when a pre-test command failed."""
        ...

    def collection_errors(self, run: TestRun) -> list[str]:
        """The nodes of `run` that stand for a test file that could not even be loaded (its
        imports failed), not for a test."""
        ...
