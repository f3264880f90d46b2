"""Test runners as plug-ins: how a task's tests are run in the sandbox and each one graded.

A task's environment names its runner (`[environment.runner] kind`; pytest by default). Each
runner is one module of this package, named `*_runner.py`, that defines `RUNNER`: an object of
the `TestRunner` protocol (runners/request.py). `runners()` is the table from kind to runner,
made from those modules: adding a runner is adding one file. The tests stage of the cascade
(verifiers/tests_stage.py) and the runs on the unpatched code (`base_run`, agent/verify) take
a runner and never ask which one it is.

- `request.py` — `TestRunner` (kind, id_format, `run`, `collection_errors`), `TestRequest`,
  `NotGradable`.
- `pytest_runner.py` — pytest under the guard (verifiers/pytest_check): outcomes from its JUnit
  report, the run checked for tampering; also a plain `pytest ...` test command.
- `output.py` — `OutputRunner`, a runner graded from its console output: its kind, id format,
  default command, arguments and line parser (the command line, pre-test commands and run
  are shared).
- `django_runner.py` — Django's `./tests/runtests.py`, graded from unittest's verbose lines.
- `sympy_runner.py` — sympy's `bin/test`, graded from its verbose lines.

Any other kind is refused at load time with one line, never verified into a silent MISSING.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.protocols import Sandbox
from ooda.verifiers import tail
from ooda.verifiers.pytest_check.parse import NodeIndex, TestRun, match_id
from ooda.verifiers.pytest_check.run import TestRunError
from ooda.verifiers.runners.request import NotGradable, TestRequest, TestRunner

__all__ = ["NotGradable", "TestRequest", "TestRunner", "base_run", "runner_for", "runners"]


@functools.cache
def runners() -> dict[str, TestRunner]:
    """Every runner ooda knows, by kind: the `RUNNER` of each `*_runner.py` of this package."""
    found: dict[str, TestRunner] = {}
    for module in sorted(m.name for m in pkgutil.iter_modules(__path__)):
        if module.endswith("_runner"):
            runner = importlib.import_module(f"{__name__}.{module}").RUNNER
            if not isinstance(runner, TestRunner):
                raise TypeError(f"{__name__}.{module}.RUNNER is not a TestRunner")
            found[runner.kind] = runner
    return found


def runner_for(kind: str, *, where: str = "environment.runner") -> TestRunner:
    """The runner named `kind`; UsageError (one line) for a kind ooda does not know."""
    runner = runners().get(kind)
    if runner is None:
        raise UsageError(
            f"{where}: unknown test runner {kind!r}; known: {', '.join(sorted(runners()))}"
        )
    return runner


def base_run(runner: TestRunner, sandbox: Sandbox, request: TestRequest) -> TestRun:
    """A run whose per-test outcomes (and what the tests that did not pass said) are facts
    about the code in `sandbox`: on the unpatched code, which tests fail there, which pass,
    which files cannot be collected. Each requested id that matched nothing is "missing".

    Raises TestRunError when the run timed out or left nothing to grade (PreTestFailed when a
    pre-test command failed), NotGradable (a ValueError) for a request the runner cannot
    grade."""
    run = runner.run(sandbox, request)
    if run.timed_out:
        still = getattr(runner, "still_running", None)  # a runner that can tell which test
        running = still(sandbox, request, run.output) if still is not None else None
        raise TestRunError(f"the tests did not finish within {request.timeout_s:.0f}s"
                           + (f" ({running} was still running)" if running else ""),
                           timed_out=True)
    if not run.report_found:
        raise TestRunError(
            f"{runner.kind} left no report (exit code {run.exit_code}):\n{tail(run.output)}")
    found = NodeIndex(run.outcomes)
    for test_id in request.ids:
        if not match_id(test_id, found, request.ids):
            run.outcomes[test_id] = "missing"
    return run
