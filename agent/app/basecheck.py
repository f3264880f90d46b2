"""The base check: before the first model call, make sure the task's tests can be graded on
the unpatched code (every given test id exists there, the test command runs), so that a typo
costs one exit 2 instead of the whole model budget. It also says which FAIL_TO_PASS tests pass
there already: a task whose lists are wrong for this environment (SWE-bench's requests-2674,
whose base failed only through the network) would be "resolved" by a patch that fixes nothing."""

from __future__ import annotations

from ooda.agent.contracts.errors import UsageError
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task
from ooda.verifiers.pytest_check import TestRunError, match_id


def check_base(verifier: TaskVerifier, given: Task) -> list[str]:
    """UsageError when a test id of `given` (the task as the user wrote it) is not found on
    the base, or when its test command left no test report there. `verifier.prepare()` has
    run: the ids it derived from the command exist by construction. Returns the given
    FAIL_TO_PASS ids that pass on the base already."""
    task = verifier.task
    timeout = task.verifiers.timeout_s
    ids = list(given.fail_to_pass) + list(given.pass_to_pass)
    if ids:
        try:
            outcomes = verifier.run_base_tests(ids, timeout_s=timeout)
        except TestRunError as exc:
            if exc.timed_out:
                return []  # the unpatched code hangs (QuixBugs' bitcount): a failing base
            raise UsageError(f"the task's tests do not run on the unpatched code: "
                             f"{_first_line(exc)}") from exc
        missing = [i for i in ids if outcomes.get(i) == "missing"]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UsageError(
                f"test id {missing[0]!r}{more} matches no test on the unpatched code: "
                "check its spelling (`pytest --collect-only -q` lists the ids)"
            )
        return [i for i in given.fail_to_pass
                if (nodes := match_id(i, outcomes, ids)) and all(outcomes[n] == "passed" for n in nodes)]
    if task.test_cmd and not task.fail_to_pass:
        try:
            verifier.run_base_tests(task.test_cmd, timeout_s=timeout)
        except (TestRunError, ValueError) as exc:
            raise UsageError(f"the test command {task.test_cmd!r} does not run on the "
                             f"unpatched code: {_first_line(exc)}") from exc
    return []


def _first_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split("\n", 2)[:2])
    return text.strip() or type(exc).__name__
