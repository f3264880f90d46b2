"""The after-tests stages (security, mypy) on a second sandbox, beside the tests.

The stages that count only once the tests passed (verifiers/cascade.py `split_at_tests`) must
run where no candidate code has run: on a fresh copy of the candidate's workspace. The task
verifier makes one after the tests (the test sandbox reset and filled again). When the pool has
a second sandbox idle and nobody waits for one (a single candidate, the end of a round),
`SpareLane` takes it at once, fills it the same way (the same fill: repository, patch, hidden
tests, mypy cache) and runs those stages there while the tests run in the first sandbox. Their
results count only when every earlier stage passed, appended in the cascade's one order (the
first stage that does not pass decides, as before); otherwise they are dropped: the command the
lane is running is interrupted then (as when the run is decided), so that the sandbox goes back
to the pool at once for the candidates waiting, not after mypy finished for nothing. The
verifier starts a lane only after the syntax and tampering stages passed, so nothing of the
candidate's is looked at by a tool in a sandbox before they did, as before.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from ooda.agent.contracts.protocols import CheckSpec, Verifier, VerifierResult
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.verify.watched import Watched
from ooda.verifiers.cascade import run_cascade


class Either:
    """Set once any of its events is (None: never), as Watched reads a stop."""

    def __init__(self, *events: threading.Event | None) -> None:
        self.events = [event for event in events if event is not None]

    def is_set(self) -> bool:
        return any(event.is_set() for event in self.events)


class SpareLane:
    """The late stages of one candidate, run in a background thread on an idle sandbox."""

    def __init__(
        self,
        pool: SandboxPool,
        fill: Callable[[Path], object],
        check: CheckSpec,
        late: Sequence[Verifier],
        deadline: float | None,
        stop: threading.Event | None = None,
    ) -> None:
        self._pool = pool
        self._fill = fill
        # its own baselines dict: the optimistic stages write theirs into the check they get
        self._check = dataclasses.replace(check, baseline=dict(check.baseline))
        self._late = list(late)
        self._deadline = deadline
        self._stop = stop
        self._dropped = threading.Event()
        self._results: list[VerifierResult] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="ooda-after-tests", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            taken = self._pool.try_acquire(self._fill)
            if taken is None:
                return  # none idle: the verifier runs them after the tests, as before
            sandbox, _ = taken
            try:
                self._results = run_cascade(
                    Watched(sandbox, Either(self._stop, self._dropped)), self._check,
                    self._late, deadline=self._deadline
                )
            finally:
                self._pool.release(sandbox)
        except BaseException as exc:  # noqa: BLE001 - handed to results(), if it is asked
            self._error = exc

    def results(self) -> list[VerifierResult] | None:
        """The late stages' results once they finished; None when no sandbox was idle. What
        broke the lane (a broken sandbox: InfraError) is raised here."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._results

    def drop(self) -> None:
        """Its results are not needed (an earlier stage did not pass): the command it runs is
        interrupted, no other starts, and it gives its sandbox back; nothing it found or raised
        is reported."""
        self._dropped.set()
        self._results = None

    def running(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        """Wait for it to finish (its sandbox given back)."""
        self._thread.join(timeout_s)
