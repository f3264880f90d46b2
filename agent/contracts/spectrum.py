"""What a traced run of the tests on the unpatched code found, per test: the lines of the
repository each one ran and, for one that failed, where its traceback passed. Made by
verifiers/coverage (in the sandbox), asked for through `TracesBase` (the task verifier of
agent/verify), read by agent/mutation's fault localisation."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable


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


@dataclass(frozen=True)
class BaseTrace:
    """What fault localisation starts from: the traced run, and what the base check knew."""

    spectrum: Spectrum
    editable: Callable[[str], bool] = lambda path: True
    """Whether a candidate may change the file at this repository-relative path (not a test,
    nothing the edit policy protects)."""
    passing: tuple[str, ...] = ()
    """The tests that pass on the unpatched code."""
    failure_text: str = ""
    """What the failing tests said on the unpatched code (read for frames without a spectrum)."""


@runtime_checkable
class TracesBase(Protocol):
    """A verifier that can trace its task's tests on the unpatched code (agent/verify)."""

    def trace_base(self, *, deadline: float | None = None) -> BaseTrace:
        """The traced run of the plan's tests on the unpatched code, given a share of the time
        left before `deadline` (the run's) when it starts."""
        ...

    def limit_test_time(self, seconds: float) -> None:
        """Give each candidate's test run at most `seconds` from now on (never more than the
        plan's timeout): a source whose candidates often loop forever (mutants) asks it."""
        ...
