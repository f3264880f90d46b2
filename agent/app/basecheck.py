"""The base check: before the first model call, make sure the task's tests can be graded on
the unpatched code (every given test id exists there, the test command runs), so that a typo
costs one exit 2 instead of the whole model budget."""

from __future__ import annotations

from ooda.agent.contracts.errors import UsageError
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task
from ooda.verifiers.pytest_check import TestRunError


def check_base(verifier: TaskVerifier, given: Task) -> None:
    """UsageError when a test id of `given` (the task as the user wrote it) is not found on
    the base, or when its test command left no test report there. `verifier.prepare()` has
    run: the ids it derived from the command exist by construction."""
    task = verifier.task
    timeout = task.verifiers.timeout_s
    ids = list(given.fail_to_pass) + list(given.pass_to_pass)
    if ids:
        try:
            outcomes = verifier.run_base_tests(ids, timeout_s=timeout)
        except TestRunError as exc:
            if exc.timed_out:
                return  # the unpatched code hangs (QuixBugs' bitcount): a failing base, not a typo
            raise UsageError(f"the task's tests do not run on the unpatched code: "
                             f"{_first_line(exc)}") from exc
        missing = [i for i in ids if outcomes.get(i) == "missing"]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UsageError(
                f"test id {missing[0]!r}{more} matches no test on the unpatched code: "
                "check its spelling (`pytest --collect-only -q` lists the ids)"
            )
        return
    if task.test_cmd and not task.fail_to_pass:
        try:
            verifier.run_base_tests(task.test_cmd, timeout_s=timeout)
        except (TestRunError, ValueError) as exc:
            raise UsageError(f"the test command {task.test_cmd!r} does not run on the "
                             f"unpatched code: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 2)[:2])
    return text.strip() or type(exc).__name__
