"""`ooda config`: each option of a command with the value it would take here and where that
value comes from (flag > environment > config file > default)."""

from __future__ import annotations

import json
import os
import re
from enum import Enum
from typing import Annotated, Any

import typer

from ooda.agent.cli.config import (
    COMMANDS,
    envvar_of,
    is_option,
    load_config,
    option_names,
    value_source,
)
from ooda.agent.contracts.errors import OptionError, UsageError
from ooda.agent.contracts.options import (
    GROUPS,
    EscalationOptions,
    ModelOptions,
    option_fields,
)
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
    target = root.commands[command].make_context(command, [], parent=ctx,
                                                 resilient_parsing=True)
    config = load_config(options=names)
    values = config.for_command(command)
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for param in root.commands[command].params:
        if not is_option(param) or param.name in ("help",):
            continue
        env = param.envvar if isinstance(param.envvar, str) else envvar_of(param)
        if env in os.environ:
            value, source = os.environ[env], env
        elif param.name in values:
            value, source = values[str(param.name)], str(config.path)
        elif param.default is None and os.environ.get(FALLBACK_ENV.get(str(param.name), "")):
            fallback = FALLBACK_ENV[str(param.name)]  # read by the model client when unset
            value, source = os.environ[fallback], fallback
        else:
            value, source = param.default, "default"
        option = param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]
        problem = _problem(param, value, target, command) if source != "default" else None
        if problem:
            where = (f"{source}={value!r}" if source != str(config.path)
                     else value_source(config, command, str(param.name)))
            problems.append(f"{where}: {option}: {problem}")
        rows.append({"option": option, "value": _plain(value), "source": source, "env": env,
                     **({"error": problem} if problem else {})})
    if json_out:
        print(json.dumps({"command": command, "config_file": str(config.path)
                          if config.path else None, "options": rows}, indent=2))
    else:
        print(f"ooda {command}: option values here (flag > environment > config > default)")
        print(f"config file: {config.path or 'none (ooda.toml or [tool.ooda] in pyproject.toml)'}")
        width = max(len(r["option"]) for r in rows)
        for row in rows:
            mark = f"  <- {row['error']}" if row.get("error") else ""
            print(printable(f"  {row['option']:<{width}}  {row['value']!s:<12}  {row['source']}"
                            f"{mark}"))
    if problems:  # the command itself would stop on these: say so, as it would (exit 2)
        raise UsageError(problems[0] + (f" (and {len(problems) - 1} more)"
                                        if len(problems) > 1 else ""))


FALLBACK_ENV = {"base_url": "OPENAI_BASE_URL"}
"""Options that, left unset, take a variable of their own (the model client reads it)."""


def _problem(param: Any, value: Any, ctx: Any, command: str) -> str | None:
    """Why `value` is no value of `param` (its type's own words, or its option's own check),
    or None."""
    try:
        converted = param.process_value(ctx, value)
    except Exception as exc:  # click's BadParameter (typer vendors its own click)
        message = getattr(exc, "message", None) or str(exc)
        return _plain_words(str(message))
    if param.name in FALLBACK_ENV and converted and not re.match(r"https?://[^/]", converted):
        return "not an http:// or https:// URL"
    return _out_of_range(command, str(param.name), converted)


def _out_of_range(command: str, name: str, value: Any) -> str | None:
    """What the option's own check (agent/contracts/options.py; `ooda eval`'s counts) says of
    `value`, the other options at their defaults: the words the command itself would stop
    with, without the flag."""
    for group in GROUPS:
        for f, spec in option_fields(group):
            if (spec.name or f.name) != name or (spec.commands is not None
                                                 and command not in spec.commands):
                continue
            # the checks that need a model, or a model to escalate to, are given one
            given = {"escalate_to": "a model to escalate to"} if group is EscalationOptions \
                else {"name": "a model"} if group is ModelOptions else {}
            try:
                checked = group(**{**given, f.name: value})
                checked.check("the model") if group is EscalationOptions else checked.check()
            except OptionError as exc:
                return str(exc).removeprefix(exc.flag).lstrip(": ")
            except (UsageError, TypeError):
                return None
            return None
    if command == "eval" and name in ("concurrency", "requests") and isinstance(value, int) \
            and value < 1:  # `ooda eval`'s own counts (agent/app/evaluate/options.py)
        return f"must be at least 1 (got {value})"
    return None


def _plain_words(message: str) -> str:
    return re.sub(r"Input should be a valid (\w+), unable to parse string as an? \w+",
                  lambda m: f"not a valid {m.group(1)}", message).replace("Value error, ", "")


def _plain(value: Any) -> Any:
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str | list):
        return value
    return str(value)
