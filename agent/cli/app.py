"""The `ooda` command line (typer): the app, one module per command registered on it, and
`main`, which maps errors to the contract's exit codes (one line each, no traceback).

Commands import their machinery lazily so that `ooda --help` and bad input answer fast. The
`ooda daemon` commands are start-up's (agent/startup/commands.py registers them).
"""

from __future__ import annotations

import sys
import tempfile
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from ooda.agent.cli import doctor, report, serve, verify
from ooda.agent.cli import run as run_cmd
from ooda.agent.cli import sandbox as sandbox_cmd
from ooda.agent.cli import tasks as tasks_cmd
from ooda.agent.cli.ci import ci
from ooda.agent.cli.eval import eval_command
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.support.textsafe import printable

if TYPE_CHECKING:
    from ooda.agent.app.run import Prestarted

app = typer.Typer(
    name="ooda",
    help="Turn a fast code model into a reliable one: sample many candidate patches, verify "
    "each in a sandbox (pytest, ruff, mypy), feed failures back until one passes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.add_typer(tasks_cmd.app, name="tasks")
app.add_typer(sandbox_cmd.app, name="sandbox")
app.command("eval")(eval_command)
app.command("ci")(ci)
app.command("report")(report.report_command)
app.command("run")(run_cmd.run)
app.command("verify")(verify.verify)
app.command("doctor")(doctor.doctor)
app.command("serve")(serve.serve)


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
    return _click_command


def main(argv: Sequence[str] | None = None, *, prestarted: Prestarted | None = None) -> None:
    """Entry point: run the command line `argv` (default sys.argv[1:]); `prestarted` is what
    start-up began for it (agent/startup/prestart.py), handed to the command that runs.
    Errors map to the contract's exit codes, one line each, no traceback."""
    try:
        returned = click_command().main(
            args=list(argv) if argv is not None else None,
            standalone_mode=False,
            obj=prestarted,
        )
        if returned == 130:  # typer's answer to Ctrl-C when not in standalone mode
            raise KeyboardInterrupt
    except UsageError as exc:
        fail(str(exc), 2)
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
                raise SystemExit(0) from None
            fail(exc.format_message(), 2)  # type: ignore[attr-defined]
        # Anything else is a bug: keep the traceback for the report, out of the user's way
        crash = Path(tempfile.gettempdir()) / "ooda-crash.log"
        crash.write_text(traceback.format_exc(), encoding="utf-8")
        fail(f"internal error: {type(exc).__name__}: {exc} (traceback in {crash})", 3)


def _is_click_usage_error(exc: BaseException) -> bool:
    """typer raises click's usage errors (from click or its own vendored copy)."""
    return any(cls.__name__ in ("UsageError", "ClickException") for cls in type(exc).__mro__)
