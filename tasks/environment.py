"""The `[environment]` table of task.toml: the image a task's tests run in, as data.

The table is an environment spec (agent/sandbox/environments/spec.py, EnvSpec: `python`, `apt`,
`pip`, `pre_install`, `requirements`, `install`, `build_env`, `tools` and a
`[environment.runner]` table with `kind`, `packages`, `plugins`, `test_cmd`, `pre_test`). It is
kept here as the plain table (the layers above the sandbox, agent/core among them, read tasks
but not the sandbox); agent/verify/environment.py turns it into an EnvSpec, checking every key.
Checked here, at load time: that it is a table, and that the runner's kind is one of the
test-runner registry (verifiers/runners.py): an unknown or not yet runnable one is bad input,
never a silent MISSING at verification.
"""

from __future__ import annotations

from typing import Any

from ooda.agent.contracts.errors import UsageError
from ooda.verifiers.runners import runner_for


def environment_of(table: object, where: str) -> dict[str, Any] | None:
    """The `[environment]` table (None when there is none); UsageError if plainly bad."""
    if table is None:
        return None
    if not isinstance(table, dict):
        raise UsageError(f"{where}: 'environment' must be a table")
    runner = table.get("runner", {})
    if not isinstance(runner, dict):
        raise UsageError(f"{where}: 'environment.runner' must be a table")
    kind = runner.get("kind", "pytest")
    if not isinstance(kind, str):
        raise UsageError(f"{where}: 'environment.runner.kind' must be a string")
    runner_for(kind, where=f"{where} [environment.runner]")
    return dict(table)
