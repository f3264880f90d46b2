"""What a SWE-bench instance runs in, and which of its test ids can be graded.

- `environment_table`: the instance's `[environment]` (agent/sandbox/environments/swebench.py's
  per-repository, per-version specs), as task.toml's table; UsageError for a repository or
  version without a spec, or a runner ooda does not know (verifiers/runners/);
- `usable_ids`: SWE-bench's lists hold the odd junk id (`[100%]`, pytest's progress column cut
  into the list); those are dropped, with the reason, so one never fails collection for all;
- `with_conda_packages`: the table with the optional packages of the repository's conda
  environment file, for specs that name one (read from the clone at export);
- `environment_toml`: the table as TOML text.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ooda.agent.sandbox.environments import swebench as specs
from ooda.tasks.environment import environment_of
from ooda.tasks.importers.common import toml_list, toml_str
from ooda.tasks.importers.swebench_conda import env_file_packages

_PYTEST_ID = re.compile(r"^[^\s\[\]:][^\s]*?(?:::.+)?$", re.DOTALL)
"""A pytest id: a path (not starting with `[` or `:`), optionally `::` and the rest."""


def environment_table(repo: str, version: str, where: str) -> dict[str, Any]:
    """The `[environment]` table of `repo` at SWE-bench `version` (UsageError if none)."""
    data = json.loads(json.dumps(specs.spec_for(repo, version).to_dict()))  # lists, as TOML's
    if data.get("install") is None:
        data["install"] = ""  # not installed (a missing key would mean the default install)
    table: dict[str, Any] = {k: v for k, v in data.items() if v is not None}
    environment_of(table, where)  # the runner must be one ooda grades
    return table


def with_conda_packages(table: dict[str, Any], repo: str, version: str, clone: Path,
                        commit: str) -> dict[str, Any]:
    """`table` with `optional`: the packages of the repository's conda environment file at
    `commit` (the harness reads it at environment_setup_commit) that the spec does not pin
    already, when the spec names such a file (swebench_conda.py)."""
    paths = specs.conda_env_files(repo, version)
    if not paths:
        return table
    pinned = {_name(p) for p in table.get("pip", ())}
    found = [p for p in env_file_packages(clone, commit, paths) if _name(p) not in pinned]
    return {**table, "optional": found} if found else table


def _name(spec: str) -> str:
    return re.split(r"[\s<>=!~;\[]", spec, maxsplit=1)[0].lower().replace("_", "-")


def usable_ids(ids: list[str], kind: str = "pytest") -> tuple[list[str], list[str]]:
    """(the ids the runner can be given, the junk ones dropped); only pytest ids have a form
    to check (django's and sympy's are names); an id that looks like an option (django's
    lists hold a test's docstring line "--squashed-name specifies ...") is junk for all."""
    keep = [i for i in ids if not i.lstrip().startswith("-")
            and (kind != "pytest" or _PYTEST_ID.match(i.strip()))]
    return keep, [i for i in ids if i not in keep]


def environment_toml(table: dict[str, Any]) -> str:
    """`[environment]` (+ its `runner` and `build_env` tables) as TOML text."""
    lines = ["[environment]"]
    tables: dict[str, dict[str, Any]] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            tables[key] = value
        elif value is not None:
            lines.append(f"{key} = {_value(value)}")
    for name, sub in tables.items():
        lines += ["", f"[environment.{name}]"]
        lines += [f"{key} = {_value(value)}" for key, value in sub.items() if value is not None]
    return "\n".join(lines) + "\n"


def _value(value: object) -> str:
    if isinstance(value, str):
        return toml_str(value)
    if isinstance(value, list | tuple):
        return toml_list([str(v) for v in value])
    raise TypeError(f"not a TOML string or list: {value!r}")
