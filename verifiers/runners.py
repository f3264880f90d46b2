"""The test-runner registry: how a task's tests are run and graded, by runner kind.

A task's environment names its runner (`[environment.runner] kind`). Each runner says how its
test ids look and whether ooda can run and grade it per test: pytest (JUnit report under the
guard, verifiers/pytest_check), Django's `./tests/runtests.py` and sympy's `bin/test` (graded
from their output, verifiers/output_runners.py). Any other kind is refused at load time with
one line, never verified into a silent MISSING.
"""

from __future__ import annotations

from dataclasses import dataclass

from ooda.agent.contracts.errors import UsageError


@dataclass(frozen=True)
class Runner:
    """One kind of test runner."""

    kind: str
    id_format: str
    """What a test id of this runner looks like (for messages and docs)."""
    runnable: bool
    """ooda can run it in a sandbox and grade every test from its own report."""


RUNNERS: dict[str, Runner] = {
    r.kind: r
    for r in (
        Runner("pytest", "path/to/test_file.py::Class::test_name[param]", True),
        Runner("django", "test_name (module.TestCase)", True),
        Runner("sympy", "test_name (in a file given to bin/test)", True),
    )
}
"""Every runner kind ooda knows, by name."""


def runner_for(kind: str, *, where: str = "environment.runner") -> Runner:
    """The runnable runner named `kind`; UsageError (one line) for an unknown kind or one whose
    grading is not built yet."""
    runner = RUNNERS.get(kind)
    if runner is None:
        raise UsageError(
            f"{where}: unknown test runner {kind!r}; known: {', '.join(sorted(RUNNERS))}"
        )
    if not runner.runnable:
        raise UsageError(
            f"{where}: the {kind} test runner (ids like {runner.id_format!r}) is not supported "
            "yet: ooda grades only pytest suites per test (see docs/SWEBENCH.md)"
        )
    return runner
