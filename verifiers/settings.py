"""What building a verifier stage may need from the task's plan (verifiers/cascade.py `build`
hands it to each stage module's `stage(settings)`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ooda.verifiers.runners import TestRunner


@dataclass(frozen=True)
class StageSettings:
    """The task's say over how its stages run."""

    runner: TestRunner | None = None
    """The task's test runner (verifiers/runners/; None: pytest)."""
    security_rules: Sequence[str] | None = None
    """The ruff `S` rules the security stage checks (None: its default set)."""
