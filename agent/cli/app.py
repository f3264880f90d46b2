"""The `ooda` command line (typer): the app, one module per command registered on it, and
`main`, which maps errors to the contract's exit codes (one line each, no traceback).

Commands import their machinery lazily so that `ooda --help` and bad input answer fast. The
`ooda daemon` commands are start-up's (agent/startup/commands.py registers them).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from ooda.agent.cli import config_cmd, doctor, prompt, report, serve, verify
from ooda.agent.cli import run as run_cmd
from ooda.agent.cli import sandbox as sandbox_cmd
from ooda.agent.cli import tasks as tasks_cmd
from ooda.agent.cli.ci import ci
from ooda.agent.cli.config import (
    Config,
    add_envvars,
    default_map,
    is_option,
    load_config,
    option_names,
    value_source,
)
from ooda.agent.cli.eval import eval_command
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.support.oserrors import storage_problem
from ooda.agent.support.textsafe import printable

if TYPE_CHECKING:
    from ooda.agent.app.run import Prestarted

app = typer.Typer(
    name="ooda",
    help="Turn a fast code model into a reliable one: sample many candidate patches, verify "
    "each in a sandbox (pytest, ruff, mypy), feed failures back until one passes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            print(f"ooda {version('ooda')}")
        except PackageNotFoundError:
            print("ooda (not installed as a package)")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    ctx: typer.Context,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, show_default=False,
                                         help="More detail on stderr (-vv: debug).")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q",
                                        help="No live display; results and errors only.")
                     ] = False,
    show_version: Annotated[bool, typer.Option("--version", "-V", callback=_version,
                                               is_eager=True,
                                               help="Print ooda's version and exit.")] = False,
) -> None:
    """Global options: anywhere on the line (`ooda -q run ...` or `ooda run ... -q`)."""
    ctx.meta["ooda.quiet"] = quiet
    ctx.meta["ooda.verbose"] = verbose
    if verbose:
        import logging

        # -v: ooda's own messages (retries, endpoint quirks); -vv: every library's debug too
        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.WARNING,
                            format="ooda: %(name)s: %(message)s")
        logging.getLogger("ooda").setLevel(logging.DEBUG if verbose > 1 else logging.INFO)
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.command("eval")(eval_command)
app.command("ci")(ci)
app.command("report")(report.report_command)
app.command("run")(run_cmd.run)
app.command("verify")(verify.verify)
app.command("prompt")(prompt.prompt)
app.command("doctor")(doctor.doctor)
app.command("serve")(serve.serve)
app.command("config")(config_cmd.config_command)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print a one-line error on stderr and exit with the contract's code."""
    first = message.strip().splitlines()[0] if message.strip() else "error"
    print(f"ooda: error: {printable(first)}", file=sys.stderr)
    raise SystemExit(code)


_click_command: Any = None


def click_command() -> Any:
    """The click command typer builds from `app` (built once per process: ~20 ms; the daemon
    builds it before it forks, after start-up registered its commands)."""
    global _click_command
    if _click_command is None:
        _click_command = typer.main.get_command(app)
        add_envvars(_click_command)
    return _click_command


def warm_parsers(command: Any) -> None:
    """Build every option's value parser of `command` and its subcommands now (typer builds
    each on the first command line that uses it, ~15 ms for `run`): the daemon does it once
    before it forks."""
    for param in getattr(command, "params", []):
        build = getattr(param, "get_runtime_param", None)
        if build is not None:
            build()
    context_class, help_option = (getattr(command, "context_class", None),
                                  getattr(command, "get_help_option", None))
    if context_class is not None and help_option is not None:  # made once per command
        help_option(context_class(command, info_name=command.name))
    for sub in getattr(command, "commands", {}).values():
        warm_parsers(sub)


def main(argv: Sequence[str] | None = None, *, prestarted: Prestarted | None = None) -> None:
    """Entry point: run the command line `argv` (default sys.argv[1:]); `prestarted` is what
    start-up began for it (agent/startup/prestart.py), handed to the command that runs.
    Errors map to the contract's exit codes, one line each, no traceback."""
    try:
        command = click_command()
        names = option_names(command)
        config = load_config(options=names)
        returned = command.main(
            args=globals_first(command, list(sys.argv[1:] if argv is None else argv)),
            standalone_mode=False,
            obj=prestarted,
            prog_name="ooda",
            default_map=default_map(config, names),
        )
        if returned == 130:  # typer's answer to Ctrl-C when not in standalone mode
            raise KeyboardInterrupt
    except UsageError as exc:  # an option's value out of range names where it was written
        fail(_where_from(exc, config if "config" in locals() else None) + str(exc), 2)
    except InfraError as exc:
        fail(str(exc), 3)
    except (KeyboardInterrupt, typer.Abort):
        fail("interrupted", 130)
    except typer.Exit as exc:
        raise SystemExit(exc.exit_code) from None
    except SystemExit:
        raise
    except Exception as exc:
        if _is_click_usage_error(exc):
            if type(exc).__name__ == "NoArgsIsHelpError":
                # bare `ooda` printed its help: no command is an incomplete command line, exit 2
                # (click >= 8.2, uv, ruff and cargo do the same; gh exits 0)
                with contextlib.suppress(BrokenPipeError):
                    print(exc.ctx.get_help())  # type: ignore[attr-defined]
                raise SystemExit(2) from None
            where = _where_from(exc, config if "config" in locals() else None)
            fail(where + _plain_message(exc.format_message()), 2)  # type: ignore[attr-defined]
        storage = storage_problem(exc)
        if storage is not None:  # the machine's, not a bug: no traceback to keep
            fail(storage, 3)
        # Anything else is a bug: keep the traceback for the report, out of the user's way
        fail(f"internal error: {type(exc).__name__}: {exc} ({_save_crash_log()})", 3)


def _save_crash_log() -> str:
    """The traceback in a file of this user's own (never one path every user shares):
    `$XDG_STATE_HOME/ooda/` (default ~/.local/state/ooda/), else a private temporary file;
    what to tell the user about it."""
    text = traceback.format_exc()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    try:
        folder = Path(state) / "ooda"
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        crash = folder / f"crash-{stamp}-{os.getpid()}.log"
        crash.write_text(text, encoding="utf-8")
    except OSError:
        try:
            fd, name = tempfile.mkstemp(prefix=f"ooda-crash-{stamp}-", suffix=".log")
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            crash = Path(name)
        except OSError as exc:
            return f"no traceback saved: {exc.strerror or exc}"
    return f"traceback in {crash}"


GLOBAL_FLAGS = re.compile(r"-[qvV]+|--quiet|--verbose|--version")


def globals_first(command: Any, argv: list[str]) -> list[str]:
    """-q, -v and -V where people type them (as uv and ruff take them): anywhere on the line,
    moved before the command, where click reads its group's options. The value of an option
    that takes one (`--statement -v`) and everything after `--` stay where they are."""
    lifted: list[str] = []
    kept: list[str] = []
    current = command
    args = iter(argv)
    for arg in args:
        if arg == "--":
            kept += [arg, *args]
            break
        own = _option(current, arg) if current is not command else None
        if own is None and GLOBAL_FLAGS.fullmatch(arg):
            lifted.append(arg)
            continue
        kept.append(arg)
        if arg.startswith("-") and "=" not in arg:
            option = own or _option(current, arg)
            if option is not None and not (getattr(option, "is_flag", False)
                                           or getattr(option, "count", False)):
                kept += itertools.islice(args, option.nargs)
        elif not arg.startswith("-") and arg in getattr(current, "commands", {}):
            current = current.commands[arg]
    return lifted + kept


def _option(command: Any, arg: str) -> Any:
    """The option of `command` that `arg` names, or None."""
    for param in getattr(command, "params", []):
        if arg in (*getattr(param, "opts", ()), *getattr(param, "secondary_opts", ())):
            return param if getattr(param, "param_type_name", "") == "option" else None
    return None


def _where_from(exc: Exception, config: Config | None) -> str:
    """For a bad value that was not typed on the line: where it was written, so that the
    user knows what to fix (`OODA_SAMPLES='abc': `, `samples = 'eight' in ./ooda.toml: `)."""
    ctx, param = getattr(exc, "ctx", None), getattr(exc, "param", None)
    if ctx is None or param is None or not is_option(param):
        return ""
    source = getattr(ctx.get_parameter_source(param.name), "name", "")
    if source == "ENVIRONMENT" and isinstance(param.envvar, str):
        return f"{param.envvar}={os.environ.get(param.envvar, '')!r}: "
    if source == "DEFAULT_MAP" and config is not None and config.path is not None:
        return value_source(config, str(ctx.info_name), str(param.name)) + ": "
    return ""


def _plain_message(message: str) -> str:
    """click's message without the validation library's wording ("Value error, ", "Input
    should be a valid integer, unable to parse ...") or an env var the user did not use."""
    message = re.sub(r":\n\t", ": ", message).replace(",\n\t", ", ")  # "Choose from:" lists
    message = re.sub(r" \(env var: '[A-Z0-9_]+'\)", "", message)
    message = message.replace("Value error, ", "")
    return re.sub(r"Input should be a valid (\w+), unable to parse string as an? \w+",
                  lambda m: f"not a valid {m.group(1)}", message)


def _is_click_usage_error(exc: BaseException) -> bool:
    """typer raises click's usage errors (from click or its own vendored copy)."""
    return any(cls.__name__ in ("UsageError", "ClickException") for cls in type(exc).__mro__)
