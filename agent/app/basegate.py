"""The base check overlapped with the first model requests.

When the loop's prompt does not depend on what the unpatched code does (the task names its
tests: the plan's test lists come from the task, not from the base), `run_task` settles the
plan in a set-up thread (the environment built, the base's tests run: agent/verify/prepare.py)
while the loop already asks the model. The loop judges candidates through a GatedVerifier,
whose every verify() waits for the settled plan: no candidate is judged before the base
check has said the base can judge them. When it cannot (an uncollectable base: exit 2; an
environment that does not build: exit 3), the first verify() raises BaseCheckFailed, an
InfraError, which stops the loop as a broken sandbox does; `run_task` then writes run.json
saying that the answers received meanwhile were discarded, and raises the base check's own
error. A model that refuses the first request (a wrong model name, a bad key) stops the run
as before, without waiting for the base check.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import SandboxBackend, Verdict
from ooda.agent.contracts.spectrum import BaseTrace
from ooda.agent.support.text import one_line
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.verifier import TaskVerifier


class BaseCheckFailed(InfraError):
    """The plan could not be settled while the loop ran; `cause` is why (UsageError or
    InfraError, as it would have been raised before the loop)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__("stopped: the base check failed")  # what each candidate records
        self.cause = cause

    def reason(self) -> str:
        """run.json's reason: the base check's own error, in one line."""
        return f"the base check failed: {one_line(self.cause)}"


def overlaps(plan: TaskPlan) -> bool:
    """Whether the loop may start before `plan` is settled: its tests are named by the task
    (with only a test command, the failing tests found on the base are what the loop is
    asked to fix)."""
    return bool(plan.tests.ids)


class GatedVerifier:
    """The loop's PatchVerifier while the plan settles in the background."""

    def __init__(
        self,
        settling: Future[tuple[TaskPlan, TaskVerifier]],
        on_failure: Callable[[], None] | None = None,
    ) -> None:
        self._settling = settling
        self._on_failure = on_failure
        """Called once the plan is known not to settle, before the first candidate records
        its stop (the progress display drops its rows: the error's one line says it all)."""

    def settled(self) -> tuple[TaskPlan, TaskVerifier]:
        """The settled plan and its verifier, once there (BaseCheckFailed when not)."""
        try:
            return self._settling.result()
        except BaseException as exc:  # Ctrl-C in the set-up thread is its failure too
            if self._on_failure is not None:
                self._on_failure()
            raise BaseCheckFailed(exc) from exc

    def verify(
        self,
        patch: str,
        *,
        log_dir: Path | None = None,
        deadline: float | None = None,
        verdict_only: bool = False,
        stop: threading.Event | None = None,
    ) -> Verdict:
        _, verifier = self.settled()
        return verifier.verify(patch, log_dir=log_dir, deadline=deadline,
                               verdict_only=verdict_only, stop=stop)

    def trace_base(self, *, deadline: float | None = None) -> BaseTrace:
        """The settled verifier's traced run of the base (TracesBase, for --model mutate)."""
        _, verifier = self.settled()
        return verifier.trace_base(deadline=deadline)

    def limit_test_time(self, seconds: float) -> None:
        _, verifier = self.settled()
        verifier.limit_test_time(seconds)

    @property
    def backend(self) -> SandboxBackend | None:
        """The settled verifier's backend (None while it settles, or when it failed)."""
        if not self._settling.done() or self._settling.exception() is not None:
            return None
        return self._settling.result()[1].backend
