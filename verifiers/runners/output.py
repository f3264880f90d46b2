"""`OutputRunner`: a test runner graded from its console output (Django's runtests.py, sympy's
bin/test: they write no JUnit report). One is its kind, its id format, its default command line,
the arguments a request gives it and a parser of its output's lines; the rest is shared: the
command line (VAR=value words in front become the environment), the task's pre-test commands
first in the same shell (PreTestFailed when one fails), the run and its outcomes.

Unlike pytest under the guard, code under test could print a fake line: this grading is as
trustworthy as SWE-bench's own log parsing, no more (docs/SWEBENCH.md).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers import pretest, tail
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import PreTestFailed
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


def run_graded(sandbox: Sandbox, request: TestRequest, kind: str, argv: list[str],
               env: dict[str, str], outcomes: Callable[[str], dict[str, str]]) -> TestRun:
    """Run `argv` in `sandbox` (the request's pre-test commands first) and read each test's
    outcome from the output with `outcomes`."""
    if request.command and not request.ids:
        raise NotGradable(f"the {kind} test runner runs the task's test ids; a test command "
                          "is graded only when it is a plain pytest call")
    wrapped, nonce = pretest.wrap(argv, request.pre_test)
    result = sandbox.run(wrapped, timeout_s=max(request.timeout_s, 0.1), env=env)
    failed = None if result.timed_out else pretest.failure(result.output, request.pre_test,
                                                           nonce)
    if failed:
        raise PreTestFailed(f"{failed}:\n{tail(result.output, 1500)}")
    found = outcomes(result.output)
    commands = [*(f"(pre-test) {c}" for c in request.pre_test), shlex.join(argv)]
    return TestRun(outcomes=found, exit_code=result.exit_code, timed_out=result.timed_out,
                   report_found=bool(found), output=result.output,
                   duration_s=result.duration_s, commands=commands, limit=result.limit)


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
