"""How a sandbox's breakage reaches the verdict, and the verdict of a finished cascade.

A sandbox that could not run a command at all because it broke (its container went away: the
engine restarted, the container was removed) raises SandboxBroken, an infrastructure error that
ends the run (exit 3), never a result a verifier would read as the candidate's failure, a tool
crash or a skipped stage (the cascade lets InfraError through). `Watched` is the sandbox as the
verifiers see it: it gives that error one wording whatever the backend ("the <backend> sandbox
broke while verifying: <why>", one line). A sandbox that was closed, or whose container the
host killed after a command outlived its timeout, still answers with an exit-125 result: that
is the candidate's doing (a hang), not the infrastructure's.

Given the run's `stop` event, `Watched` also ends a candidate's verification once the run is
decided: a command is not started after it is set, one running is interrupted (a sandbox that
can, `interrupt()`: Docker's PID 1 kills it at once, bwrap's within 0.2 s; local runs it to
its end) and its result dropped: VerificationStopped, never a verdict read from a command cut
short.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from ooda.agent.contracts.errors import SandboxBroken, VerificationStopped
from ooda.agent.contracts.protocols import (
    ExecResult,
    Sandbox,
    Verdict,
    VerdictStatus,
    VerifierResult,
)
from ooda.agent.support.reasons import headline
from ooda.verifiers import clip

FEEDBACK_LIMIT = 4000
"""Most characters of feedback a verdict carries for the model."""
STOP_POLL_S = 0.01
"""How often a running command looks at the run's stop event."""


class Stop(Protocol):
    """What ends a verification: the run's stop event (or several, agent/verify/spare.py)."""

    def is_set(self) -> bool: ...


class Watched:
    """A sandbox whose breakage is reported in one line that names the backend."""

    def __init__(self, inner: Sandbox, stop: Stop | None = None) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.workspace = inner.workspace
        self.workdir = inner.workdir
        self.stop = stop

    def run(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        stop = self.stop
        if stop is None:
            return self._run(argv, timeout_s, env)
        if stop.is_set():
            raise VerificationStopped()
        interrupt: Callable[[], None] | None = getattr(self.inner, "interrupt", None)
        done = threading.Event()
        watcher = None
        if interrupt is not None:
            watcher = threading.Thread(target=_interrupt_on, args=(stop, done, interrupt),
                                       name="ooda-stop-watch", daemon=True)
            watcher.start()
        try:
            result = self._run(argv, timeout_s, env)
        finally:
            done.set()
            if watcher is not None:
                watcher.join()
        if stop.is_set():  # cut short, or finished as the run was decided: no verdict
            raise VerificationStopped()
        return result

    def _run(
        self, argv: Sequence[str], timeout_s: float, env: Mapping[str, str] | None
    ) -> ExecResult:
        try:
            return self.inner.run(argv, timeout_s=timeout_s, env=env)
        except SandboxBroken as exc:
            lines = str(exc).strip().splitlines()
            why = lines[0] if lines else "it stopped answering"
            head = f"the {self.backend} sandbox broke while verifying: "
            raise SandboxBroken(why if why.startswith(head) else head + why) from exc

    def close(self) -> None:
        self.inner.close()


def _interrupt_on(stop: Stop, done: threading.Event,
                  interrupt: Callable[[], None]) -> None:
    """While a command runs (until `done`, which wakes it at once: run() joins it before it
    returns, so no later command can be interrupted): once `stop` is set, interrupt it."""
    while not done.wait(STOP_POLL_S):
        if stop.is_set():
            interrupt()
            return


def verdict_from(results: list[VerifierResult], changed: list[str]) -> Verdict:
    """The verdict of a finished cascade: the first stage that did not pass decides."""
    for result in results:
        if result.status in ("passed", "skipped"):
            continue
        status: VerdictStatus = (
            "timeout"
            if result.status == "timeout"
            else "error"
            if result.status == "error"
            else "failed"
        )
        first = headline(result.summary)
        reason = clip(f"{result.name} {result.status}" + (f": {first}" if first else ""), 300)
        return Verdict(status, reason, results, clip(result.summary, FEEDBACK_LIMIT), changed)
    names = ", ".join(r.name for r in results)
    return Verdict("passed", f"passed: {names}", results, "", changed)
