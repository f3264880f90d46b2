"""The `[environment]` table of task.toml: the image a task's tests run in, as data.

The table is an environment spec (agent/sandbox/environments/spec.py, EnvSpec: `python`, `apt`,
`pip`, `pre_install`, `requirements`, `install`, `build_env`, `tools` and a
`[environment.runner]` table with `kind`, `packages`, `plugins`, `test_cmd`, `pre_test`). It is
kept here as the plain table (the layers above the sandbox, agent/core among them, read tasks
but not the sandbox); agent/verify/environment.py turns it into an EnvSpec, checking every key.
Checked here, at load time: that it is a table, and that the runner's kind is one of the
test-runner table (verifiers/runners/): an unknown one is bad input, never a silent MISSING at
verification.

`ooda run` and `ooda ci` may also be given the table (`--environment PATH`, or `environment`
in ooda.toml): `environment_from_file` reads it; a plain repository's own is detected by
tasks/detect_environment.py.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
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


ENVIRONMENT_CHOICES = ("auto", "none")
"""`--environment auto|none|PATH`: detect it, keep ooda's image, or read it from a file."""


def check_environment_choice(value: str) -> None:
    """UsageError unless `value` is auto, none or an existing file."""
    if value not in ENVIRONMENT_CHOICES and not Path(value).is_file():
        raise UsageError(f"--environment {value!r}: give auto, none, or a TOML file holding "
                         "an [environment] table (no such file)")


def environment_from_file(path: Path) -> dict[str, Any]:
    """The environment table a TOML file holds (`--environment PATH`): its [environment]
    table, [tool.ooda.environment] in a pyproject.toml, or else the file's top level itself
    (checked as task.toml's is; its keys are the EnvSpec's, which the caller checks)."""
    where = str(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"--environment {where}: cannot read it as TOML: {exc}") from exc
    ooda = (data.get("tool") or {}).get("ooda") or {}
    table = data.get("environment", ooda.get("environment", data))
    checked = environment_of(table, f"--environment {where}")
    if checked is None or not checked:
        raise UsageError(f"--environment {where}: no [environment] table in it")
    return checked
