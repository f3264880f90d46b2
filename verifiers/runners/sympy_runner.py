"""sympy's `bin/test -C --verbose FILES`, graded per test from the `test_name ok|F|E|f|s|X`
lines it prints; ids are `test_name`; the files are the task's test files (those its test
patch touches)."""

from __future__ import annotations

import re

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.runners.output import command, run_graded
from ooda.verifiers.runners.request import TestRequest

SYMPY_CMD = "bin/test -C --verbose"
_LINE = re.compile(r"^(?P<name>_*test_\w+)\s+(?P<outcome>ok|F|E|f|s|X|T)\b", re.MULTILINE)
_OUTCOMES = {"ok": "passed", "F": "failed", "E": "error", "f": "xfailed", "s": "skipped",
             "X": "failed", "T": "failed"}


def sympy_outcomes(output: str) -> dict[str, str]:
    """`test_name` -> outcome, from `bin/test --verbose` output."""
    return {m.group("name"): _OUTCOMES[m.group("outcome")] for m in _LINE.finditer(output)}


class SympyRunner:
    kind = "sympy"
    id_format = "test_name (in a file given to bin/test)"
    exit_status_checked = False
    stops_at_first_failure = False

    def command(self, request: TestRequest) -> tuple[list[str], dict[str, str]]:
        """(argv, environment): bin/test with the task's test files."""
        files = [f for f in request.test_files if f.endswith(".py")]
        return command(request.runner_cmd or SYMPY_CMD, files)

    def run(self, sandbox: Sandbox, request: TestRequest) -> TestRun:
        argv, env = self.command(request)
        return run_graded(sandbox, request, self.kind, argv, env, sympy_outcomes)

    def collection_errors(self, run: TestRun) -> list[str]:
        return []


RUNNER = SympyRunner()
