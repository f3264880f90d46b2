"""`ooda config`: each option of a command with the value it would take here and where that
value comes from (flag > environment > config file > default)."""

from __future__ import annotations

import json
import os
from enum import Enum
from typing import Annotated, Any

import typer

from ooda.agent.cli.config import COMMANDS, envvar_of, is_option, load_config, option_names
from ooda.agent.contracts.errors import UsageError
from ooda.agent.support.textsafe import printable


def config_command(
    ctx: typer.Context,
    command: Annotated[str, typer.Argument(help="The command whose options to show: run, "
                                           "eval, ci or verify.")] = "run",
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable, on stdout.")
                        ] = False,
) -> None:
    """Show the option values in effect here and where each comes from (flag > OODA_*
    environment variable > ooda.toml or [tool.ooda] in pyproject.toml > default)."""
    root = ctx.find_root().command
    if command not in COMMANDS or not hasattr(root, "commands"):
        raise UsageError(f"ooda config: unknown command {command!r} "
                         f"(choose from {', '.join(COMMANDS)})")
    names = option_names(root)
    config = load_config(options=names)
    values = config.for_command(command)
    rows: list[dict[str, Any]] = []
    for param in root.commands[command].params:
        if not is_option(param) or param.name in ("help",):
            continue
        env = param.envvar if isinstance(param.envvar, str) else envvar_of(param)
        if env in os.environ:
            value, source = os.environ[env], env
        elif param.name in values:
            value, source = values[str(param.name)], str(config.path)
        else:
            value, source = param.default, "default"
        rows.append({"option": param.opts[-1] if param.opts[-1].startswith("--")
                     else param.opts[0], "value": _plain(value), "source": source, "env": env})
    if json_out:
        print(json.dumps({"command": command, "config_file": str(config.path)
                          if config.path else None, "options": rows}, indent=2))
        return
    print(f"ooda {command}: option values here (flag > environment > config > default)")
    print(f"config file: {config.path or 'none (ooda.toml or [tool.ooda] in pyproject.toml)'}")
    width = max(len(r["option"]) for r in rows)
    for row in rows:
        print(printable(f"  {row['option']:<{width}}  {row['value']!s:<12}  {row['source']}"))


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str | list):
        return value
    return str(value)
