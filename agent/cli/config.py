"""Where option values come from besides the command line: `OODA_<OPTION>` environment
variables and a config file, `ooda.toml` or the `[tool.ooda]` table of pyproject.toml (the
nearest one in the working directory or above it). Precedence: flag > environment > config >
default (click applies it: a value on the command line wins, then the option's envvar, then
the context's default_map, then the default declared in agent/contracts/options.py).

A config file holds option names (dashes or underscores) at its top level, and optionally a
table per command (`[run]`, `[eval]`; `[tool.ooda.eval]` in pyproject.toml) that overrides them
for that command. An unknown name is an error (exit 2), never silently ignored. `environment`
may be a table (the task environment of `ooda run`/`ooda ci`, see _environment_paths)."""

from __future__ import annotations

import difflib
import enum
import os
import tomllib
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import UsageError

ENV_PREFIX = "OODA_"
COMMANDS = ("run", "eval", "ci", "verify")
"""The commands whose options a config file may set."""


@dataclass
class Config:
    """A config file's values: shared ones and per command."""

    path: Path | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    per_command: dict[str, dict[str, Any]] = field(default_factory=dict)

    def for_command(self, name: str) -> dict[str, Any]:
        return {**self.shared, **self.per_command.get(name, {})}


def envvar_of(param: Any) -> str:
    """`OODA_TIME_BUDGET` for --time-budget (named after the long option)."""
    longs = [o for o in param.opts if o.startswith("--")]
    name = longs[0][2:] if longs else str(param.name)
    return ENV_PREFIX + name.upper().replace("-", "_")


def add_envvars(command: Any) -> None:
    """Give every option of `command` (and its subcommands) its OODA_* variable, shown in the
    help, unless it has one already."""
    if hasattr(command, "commands"):
        for sub in command.commands.values():
            add_envvars(sub)
        return
    for param in command.params:
        metavar = _metavar(param) if is_option(param) else str(param.name).upper()
        if getattr(param, "metavar", None) is None and metavar:
            param.metavar = metavar  # `--model MODEL`, `-n N`: not typer's `<str>`, `<int>`
        if not is_option(param) and hasattr(param, "get_usage_pieces"):
            param.get_usage_pieces = _usage_of(param)  # `ooda run [OPTIONS] PATH`
        if is_option(param) and param.envvar is None and not param.hidden \
                and param.name not in ("help",):
            param.envvar = envvar_of(param)
            param.show_envvar = True


def _usage_of(argument: Any) -> Any:
    """An argument's usage as click, uv or git write it (PATH, [PATH], PATH...), not typer's
    `{path}`."""
    name = str(argument.metavar or argument.name).upper()
    shown = (name if argument.required else f"[{name}]") + ("..." if argument.nargs != 1 else "")
    return lambda _ctx: [shown]


def _metavar(param: Any) -> str | None:
    """The metavar a user of click, pytest or ruff would expect; None for a flag."""
    descriptor = getattr(param, "type_descriptor", None)
    kind = getattr(descriptor, "annotation", None)
    if getattr(param, "is_flag", False) or kind is bool or getattr(param, "count", False):
        return None
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return "[" + "|".join(str(member.value) for member in kind) + "]"
    choices = _literal_values(kind)
    if choices:  # the option groups' choices (agent/contracts/options.py)
        return "[" + "|".join(str(choice) for choice in choices) + "]"
    name = str(param.name)
    if kind is int:
        return "N"
    if kind is float:
        return "SECONDS" if "budget" in name or "timeout" in name or "ttft" in name else "NUMBER"
    if kind is Path:
        return "DIR" if name.endswith("_dir") else "PATH"
    return name.upper()


def _literal_values(kind: Any) -> tuple[Any, ...]:
    """The values of `Literal[...]` (or `Literal[...] | None`); () for any other type."""
    if typing.get_origin(kind) is typing.Literal:
        return typing.get_args(kind)
    for arg in typing.get_args(kind):
        if typing.get_origin(arg) is typing.Literal:
            return typing.get_args(arg)
    return ()


def find_config(start: Path) -> Path | None:
    """The nearest ooda.toml, or pyproject.toml with a [tool.ooda] table, at or above
    `start`."""
    for directory in (start, *start.parents):
        own = directory / "ooda.toml"
        if own.is_file():
            return own
        project = directory / "pyproject.toml"
        if project.is_file() and "ooda" in (_read(project).get("tool") or {}):
            return project
    return None


def load_config(start: Path | None = None, options: dict[str, set[str]] | None = None
                ) -> Config:
    """The config in effect in `start` (default: the working directory); `options` (command
    -> option names) checks its names."""
    path = os.environ.get(ENV_PREFIX + "CONFIG")
    found = Path(path) if path else find_config(start or Path.cwd())
    if found is None:
        return Config()
    data = _read(found)
    table = (data.get("tool") or {}).get("ooda", {}) if found.name == "pyproject.toml" else data
    if not isinstance(table, dict):
        raise UsageError(f"{found}: [tool.ooda] must be a table")
    config = Config(found)
    for key, value in table.items():
        name = key.replace("-", "_")
        if name in COMMANDS and isinstance(value, dict):
            config.per_command[name] = {k.replace("-", "_"): v for k, v in value.items()}
        else:
            config.shared[name] = value
    _environment_paths(config, found)
    if options is not None:
        _check_names(config, options)
    return config


def _environment_paths(config: Config, found: Path) -> None:
    """`environment`: a table in the config file (`[environment]`, `[tool.ooda.environment]`)
    stands for the file itself, which `--environment PATH` reads; a relative path is relative
    to the config file's directory."""
    for command, values in [("", config.shared), *config.per_command.items()]:
        value = values.get("environment")
        if isinstance(value, dict):
            if command:
                raise UsageError(f"{found}: [{command}] environment: give auto, none or a "
                                 "path; an [environment] table goes at the top level")
            values["environment"] = str(found)
        elif isinstance(value, str) and value not in ("auto", "none") \
                and not Path(value).is_absolute():
            values["environment"] = str(found.parent / value)


def default_map(config: Config, options: dict[str, set[str]]) -> dict[str, dict[str, Any]]:
    """click's default_map: each command's options the config sets."""
    return {
        command: {k: v for k, v in config.for_command(command).items() if k in names}
        for command, names in options.items()
    }


def option_names(root: Any) -> dict[str, set[str]]:
    """command -> the names of its options, for the commands a config may set."""
    names: dict[str, set[str]] = {}
    if hasattr(root, "commands"):
        for command in COMMANDS:
            sub = root.commands.get(command)
            if sub is not None:
                names[command] = {str(p.name) for p in sub.params if is_option(p)}
    return names


def is_option(param: Any) -> bool:
    """An option (not an argument) of a click command (typer vendors its own click, so by
    its kind rather than its class)."""
    return getattr(param, "param_type_name", None) == "option"


def _check_names(config: Config, options: dict[str, set[str]]) -> None:
    known = set().union(*options.values()) if options else set()
    for command, values in [("", config.shared), *config.per_command.items()]:
        allowed = options.get(command, set()) if command else known
        for name in values:
            if not command and isinstance(values[name], dict) and name != "environment":
                # a table: a command's own values ([tool.ooda.evl] is a misspelt [eval])
                close = difflib.get_close_matches(name, COMMANDS, n=1, cutoff=0.5)
                hint = f" (did you mean [{close[0]}]?)" if close else ""
                raise UsageError(f"{config.path}: unknown table [{name}]{hint}; the tables "
                                 f"are {', '.join(f'[{c}]' for c in COMMANDS)}")
            if name not in allowed:
                close = difflib.get_close_matches(name, sorted(allowed), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                where = f"[{command}] " if command else ""
                raise UsageError(f"{config.path}: {where}unknown option {name!r}{hint}")


def value_source(config: Config, command: str, name: str) -> str:
    """Where the config file sets option `name` of `command`, as a user would look for it:
    `samples = 'eight' in /repo/ooda.toml ([eval] table)`."""
    own = name in config.per_command.get(command, {})
    value = config.for_command(command).get(name)
    key = name.replace("_", "-")
    table = f" ([{command}] table)" if own else ""
    return f"{key} = {value!r} in {config.path}{table}"


def _read(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it as TOML: {exc}") from exc
