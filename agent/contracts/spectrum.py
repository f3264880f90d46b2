"""What a traced run of the tests on the unpatched code found, per test: the lines of the
repository each one ran and, for one that failed, where its traceback passed. Made by
verifiers/coverage (in the sandbox), read by agent/mutation's fault localisation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class TestTrace:
    """One test of a traced run."""

    __test__ = False

    test_id: str
    outcome: str
    """passed | failed | error | skipped | timeout (stopped at the tracer's per-test limit)."""
    lines: Mapping[str, frozenset[int]] = field(default_factory=dict)
    """Repository-relative path -> the line numbers the test ran there."""
    frames: tuple[tuple[str, int], ...] = ()
    """Where the failure's traceback passed in the repository's files, outermost first."""
    duration_s: float = 0.0

    @property
    def failed(self) -> bool:
        return self.outcome in ("failed", "error")


@dataclass(frozen=True)
class Spectrum:
    """The tests of one traced run, in the order they ran."""

    traces: tuple[TestTrace, ...] = ()
    complete: bool = True
    """The run finished; False: cut short (its timeout), the tests that finished kept."""
    note: str = ""
    """Why it is incomplete or empty, one line."""
    duration_s: float = 0.0
