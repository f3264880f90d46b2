"""pytest, run under the guard (verifiers/pytest_check): each test's outcome from pytest's own
JUnit report, the run cross-checked with the guard's record and failed when tampered with;
test ids are node ids (`path/to/test_file.py::Class::test_name[param]`). A test command is run
when it is a plain pytest call (`pytest_command`), refused otherwise (NotGradable)."""

from __future__ import annotations

from collections.abc import Sequence

from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import (
    not_gradable,
    pytest_command,
    run_pytest,
    run_pytest_ids,
)
from ooda.verifiers.runners import base_run
from ooda.verifiers.runners.request import NotGradable, TestRequest


class PytestRunner:
    """The default runner."""

    kind = "pytest"
    id_format = "path/to/test_file.py::Class::test_name[param]"
    exit_status_checked = True
    stops_at_first_failure = True

    def run(self, sandbox: Sandbox, request: TestRequest) -> TestRun:
        if request.ids:
            # (not when whole files run: an unlisted test failing first would hide the listed)
            options = ["-x"] if request.stop_at_first_failure and not request.whole_files \
                else []
            return run_pytest_ids(sandbox, list(request.ids),
                                  request.timeout_s, request.changed_files, options,
                                  whole_files=request.whole_files, pre_test=request.pre_test,
                                  hidden_files=request.test_files)
        command = request.command or request.runner_cmd
        parsed = pytest_command(command) if command else None
        if parsed is None:
            raise NotGradable(not_gradable(command) if command else
                              "the task names no tests (fail_to_pass, pass_to_pass or a test "
                              "command)")
        args, env = parsed
        return run_pytest(sandbox, args, request.timeout_s, env=env,
                          changed_files=request.changed_files, pre_test=request.pre_test,
                          hidden_files=request.test_files)

    def collection_errors(self, run: TestRun) -> list[str]:
        """A file pytest could not collect is reported as an error whose node is the file."""
        return [node for node, outcome in run.outcomes.items()
                if outcome == "error" and "::" not in node]


RUNNER = PytestRunner()


def run_tests(
    sandbox: Sandbox, ids_or_cmd: Sequence[str] | str, timeout_s: float,
    whole_files: bool = False, pre_test: Sequence[str] = (),
) -> dict[str, str]:
    """Per-test outcomes (node id -> passed | failed | error | skipped | xfailed | missing)
    of pytest's `base_run` of node ids or a pytest command."""
    request = TestRequest(
        ids=tuple(ids_or_cmd) if not isinstance(ids_or_cmd, str) else (),
        command=ids_or_cmd if isinstance(ids_or_cmd, str) else None,
        whole_files=whole_files, timeout_s=timeout_s, pre_test=tuple(pre_test))
    return dict(base_run(RUNNER, sandbox, request).outcomes)
