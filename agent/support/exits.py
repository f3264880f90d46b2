"""How an `ooda` process ends: run a command line function and turn its SystemExit into the
exit code Python would use, then exit without the interpreter's slow teardown.

Shared by the console script (agent/startup/entry.py), the daemon's workers and
`python -m ooda.agent.cli` (agent/cli/__main__.py), which must not import start-up.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:  # (the console script imports this module: no `typing` import for it)
    from collections.abc import Callable
    from typing import NoReturn


def run_here(cli_main: Callable[[], None]) -> int:
    """Run the command line in this process (through `cli_main`); its exit code."""
    try:
        cli_main()
    except SystemExit as exc:
        return exit_code(exc)
    return 0


def exit_code(exc: SystemExit) -> int:
    """The status Python itself would exit with for this SystemExit."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def finish() -> None:
    """Run the exit handlers and flush the output, as the end of the interpreter would."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's teardown of every module (about 0.2 s once the SDKs are
    loaded). The command has returned, so every thread it waits for has been joined; one still
    running is abandoned (a request that hung when Ctrl-C came), as the normal exit would wait
    for it."""
    finish()
    os._exit(code)
