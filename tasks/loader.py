"""Load a task directory (`task.toml` + `repo/`) into a `Task`. Pure: reads files, nothing else."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class VerifierOptions:
    """The `[verifiers]` table of task.toml."""

    ruff: bool = True
    """Run ruff (baseline-relative: only new diagnostics count)."""
    mypy: bool = True
    """Run mypy (baseline-relative)."""
    timeout_s: float = 60.0
    """Wall-clock limit for each verifier run."""


@dataclass
class Task:
    """One thing to fix: a repository in its broken state and what must pass afterwards."""

    id: str
    """Task id (default: the task directory's name)."""
    statement: str
    """What to do, as given to the model."""
    repo: Path
    """The code in its broken state (never modified by ooda)."""
    fail_to_pass: list[str] = field(default_factory=list)
    """pytest node ids (or files) that fail now and must pass."""
    pass_to_pass: list[str] = field(default_factory=list)
    """pytest node ids (or files) that must keep passing."""
    gold_patch: str | None = None
    """Reference fix (unified diff text), if known."""
    test_patch: str | None = None
    """Hidden tests (unified diff text) applied only when verifying."""
    verifiers: VerifierOptions = field(default_factory=VerifierOptions)
    """Which verifiers run and their timeout."""
    test_cmd: str | None = None
    """Shell test command for plain repositories (used when no node ids are given)."""
    requirements: Path | None = None
    """A requirements file of third-party packages the repo needs in the sandbox."""
    root: Path | None = None
    """The task directory, when the task came from one."""
    replay: Path | None = None
    """Scripted answers (replay.jsonl) for the bundled endpoint, when the task ships them."""
