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

A probe (the issue's own examples, verifiers/issue_probes.py) is neither: it runs twice on the
base, and its blocks whose output was the same both times are its base behaviour, which each
candidate's behaviour is compared with; it is kept when at least one block is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ooda.agent.contracts.protocols import ReproOnBase, ReproTest
from ooda.verifiers.issue_probes import behaviour, stable
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


def probe_on_base(probe: ReproTest, runs: list[ScriptRun]) -> ReproOnBase:
    """A probe's two runs on the base: its blocks stable across them (kept when one is)."""
    prints = stable([behaviour(r.output) for r in runs if r.status != "timeout"])
    status = runs[0].status if runs else "timeout"
    exception = runs[0].exception if runs else ""
    return ReproOnBase(probe.name, status, exception, any(prints), False, prints)


class ReproSuite:
    """The kept tests of one run, set once by `adopt` and read by every verification."""

    def __init__(self, run_on_base: RunOnBase) -> None:
        self._run_on_base = run_on_base
        self._ready = threading.Event()
        self._tests: list[ReproTest] = []
        self.adopted = False

    def adopt(self, tests: list[ReproTest], deadline: float) -> list[ReproOnBase]:
        """Judge `tests` on the base, keep the failing ones (and the probes that behave the
        same twice there), and release the waiting verifications (also when judging raised)."""
        try:
            scripts = [t for t in tests if not t.probe]
            probes = [t for t in tests if t.probe]
            judged = on_base(self._run_on_base(scripts, deadline)) if scripts else []
            flags = {j.name: j.required for j in judged if j.kept}
            kept = [ReproTest(t.name, t.source, flags[t.name])
                    for t in scripts if t.name in flags]
            for probe in probes:
                mine = probe_on_base(probe, self._run_on_base([probe, probe], deadline))
                judged.append(mine)
                if mine.kept:
                    kept.append(ReproTest(probe.name, probe.source, False, probe=True,
                                          base_behaviour=mine.behaviour))
            self._tests = kept
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
