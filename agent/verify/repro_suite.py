"""A blind run's reproduction tests on the verifier's side: judged once on the unpatched code,
then frozen, and every candidate's verification waits for them.

Which scripts are kept (`on_base`), by how they end on the unpatched code
(verifiers/repro_check.py):
- an AssertionError: the script reproduces the issue as asked; kept, required (a candidate must
  pass it to pass the stage, and its failures are fed back);
- another exception: the script may reproduce the issue (the exception the issue reports) or
  break for its own reasons. Kept; required only when no script failed with an assertion, and
  never when the exception says a name is missing (ImportError, ModuleNotFoundError,
  NameError: often a name the issue invents) — such a script only ranks candidates;
- passing, a timeout, a script the environment's Python cannot parse, one that ends without a
  result or with a failed pre-test command: not kept (it cannot tell a fix from no change, or
  it says nothing).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ooda.agent.contracts.protocols import ReproOnBase, ReproTest
from ooda.verifiers.repro_check import ScriptRun

MISSING_NAME = frozenset({"ImportError", "ModuleNotFoundError", "NameError"})
"""Exceptions that say a name is missing: weak evidence of the issue."""
UNPARSABLE = frozenset({"SyntaxError", "IndentationError", "TabError"})

RunOnBase = Callable[[list[ReproTest], float], list[ScriptRun]]
"""Runs the scripts on the unpatched code before a deadline (time.monotonic())."""


def on_base(runs: list[ScriptRun]) -> list[ReproOnBase]:
    """Which scripts are kept, and which of those are required (see the module docstring)."""
    asserted = any(r.status == "failed" for r in runs)
    judged = []
    for run in runs:
        kept = run.status == "failed" or (
            run.status == "error" and run.exception not in UNPARSABLE
            and not run.exception.startswith(("the script ended", "pre-test", "SystemExit")))
        required = run.status == "failed" or (
            kept and not asserted and run.exception not in MISSING_NAME)
        judged.append(ReproOnBase(run.name, run.status, run.exception, kept, kept and required))
    return judged


class ReproSuite:
    """The kept tests of one run, set once by `adopt` and read by every verification."""

    def __init__(self, run_on_base: RunOnBase) -> None:
        self._run_on_base = run_on_base
        self._ready = threading.Event()
        self._tests: list[ReproTest] = []
        self.adopted = False

    def adopt(self, tests: list[ReproTest], deadline: float) -> list[ReproOnBase]:
        """Judge `tests` on the base, keep the failing ones, and release the waiting
        verifications (also when judging raised)."""
        try:
            judged = on_base(self._run_on_base(tests, deadline)) if tests else []
            flags = {j.name: j.required for j in judged if j.kept}
            self._tests = [ReproTest(t.name, t.source, flags[t.name])
                           for t in tests if t.name in flags]
            return judged
        finally:
            self.adopted = True
            self._ready.set()

    def wait(self, deadline: float | None) -> list[ReproTest]:
        """The kept tests, once adopted (or [] when `deadline` passes first)."""
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self._ready.wait(timeout):
            return []
        return list(self._tests)
