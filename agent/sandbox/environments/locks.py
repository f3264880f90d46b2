"""Advisory file locks under $OODA_HOME/locks, so concurrent ooda processes (candidates,
tasks, the daemon) build each base and each environment once."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator

from ooda.agent.sandbox import image


@contextlib.contextmanager
def locked(name: str) -> Iterator[None]:
    """Hold the exclusive lock `name` (blocking until it is free)."""
    directory = image.ooda_home() / "locks"
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
