"""The command line's side of the option groups (agent/contracts/options.py): `grouped(name)`
turns each parameter of a command annotated with a group (`loop: LoopOptions`) into one typer
option per field of that group, and hands the command the group built from their values. The
flags, help, defaults and choices are the groups' own declarations; the `OODA_*` variables and
the config file's names follow from the flags (agent/cli/config.py). Also here: the few options
several commands share that belong to no group (`--json`, the test ids), and `is_quiet`.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from dataclasses import Field
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import typer

from ooda.agent.contracts.errors import OptionError
from ooda.agent.contracts.options import GROUPS, SAME, OptionSpec, option_fields

F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable result on stdout.")]
RunsDirOpt = Annotated[Path, typer.Option("--runs-dir", help="Where run directories go.")]
TaskPathArg = Annotated[
    Path, typer.Argument(help="A task directory (holds task.toml) or a repository.")
]
StatementOpt = Annotated[str | None, typer.Option(help="What to do (plain repositories).")]
StatementFileOpt = Annotated[
    Path | None, typer.Option(help="File holding what to do (plain repositories).")
]
FailToPassOpt = Annotated[
    list[str] | None, typer.Option("--fail-to-pass", help="pytest id that must pass (repeat).")
]
PassToPassOpt = Annotated[
    list[str] | None,
    typer.Option("--pass-to-pass", help="pytest id that must keep passing (repeat)."),
]


def is_quiet(ctx: typer.Context) -> bool:
    """`ooda -q ...`: no live display, no notes; results and errors only."""
    return bool(ctx.find_root().meta.get("ooda.quiet"))


def grouped(command: str) -> Callable[[F], F]:
    """Decorate the function of `ooda COMMAND`: each of its parameters whose type is an option
    group becomes the group's options (those offered on `command`), and the function receives
    the group built from their values (the fields not offered keep their defaults)."""

    def wrap(func: F) -> F:
        signature = inspect.signature(func, eval_str=True)
        params: list[inspect.Parameter] = []
        groups: dict[str, tuple[type, list[tuple[str, str]]]] = {}
        # the command's click context (its own `ctx`, or one asked for here): where a value
        # out of range came from is read from it (`OptionError`)
        context = next((p.name for p in signature.parameters.values()
                        if p.annotation is typer.Context), None)
        own_context = context is None
        for param in signature.parameters.values():
            if param.annotation in GROUPS:
                group = param.annotation
                names: list[tuple[str, str]] = []
                for f, spec in option_fields(group):
                    if spec.commands is not None and command not in spec.commands:
                        continue
                    name = spec.name or f.name
                    params.append(_parameter(name, group, f, spec, command))
                    names.append((f.name, name))
                groups[param.name] = (group, names)
            else:
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))
        if context is None:
            context = "ooda_context"
            params.append(inspect.Parameter(context, inspect.Parameter.KEYWORD_ONLY,
                                            annotation=typer.Context))

        @functools.wraps(func)
        def with_groups(**values: Any) -> Any:
            ctx = values.pop(context) if own_context else values[context]
            for param_name, (group, names) in groups.items():
                built = {field_name: values.pop(name) for field_name, name in names}
                values[param_name] = group(**built)
            try:
                return func(**values)
            except OptionError as exc:
                _add_origin(exc, ctx)
                raise

        new_signature = signature.replace(parameters=params)
        with_groups.__signature__ = new_signature  # type: ignore[attr-defined]
        with_groups.__annotations__ = {p.name: p.annotation for p in params}
        return typing.cast(F, with_groups)

    return wrap


def _add_origin(exc: OptionError, ctx: typer.Context) -> None:
    """Give `exc` the click context and parameter of the option it names, as click's own
    errors for a bad value carry them: the CLI then says where the value was written when it
    was not on the command line (agent/cli/app.py)."""
    for param in ctx.command.params:
        if exc.flag in getattr(param, "opts", ()):
            exc.ctx, exc.param = ctx, param  # type: ignore[attr-defined]
            return


def one_option(group: type, field_name: str, command: str) -> Any:
    """The `Annotated` typer type of one field of `group`, for a command that takes that one
    option alone (`ooda doctor --base-url`)."""
    for f, spec in option_fields(group):
        if f.name == field_name:
            return _parameter(spec.name or f.name, group, f, spec, command).annotation
    raise KeyError(field_name)


def _parameter(name: str, group: type, f: Field[Any], spec: OptionSpec,
               command: str) -> inspect.Parameter:
    """The typer parameter of one group field, as `ooda COMMAND` offers it."""
    kind: Any = typing.get_type_hints(group)[f.name]
    default = f.default if spec.cli_default is SAME else spec.cli_default
    if spec.choices:  # typer checks a Literal's values; shown as [a|b] (cli/config.py)
        choice: Any = Literal[spec.choices]
        kind = choice | None if type(None) in typing.get_args(kind) else choice
    info = typer.Option(*spec.flags, help=spec.help_for.get(command, spec.help),
                        show_default=default not in ("", None))
    return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                             annotation=Annotated[kind, info])
