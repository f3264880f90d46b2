"""How an `ooda` process ends: run a command line function and turn its SystemExit into the
exit code Python would use, then exit without the interpreter's slow teardown.

A command may leave its tidying-up (closing its sandboxes, removing its work directory) for
after its output is complete (`after_output`): when its command line was run with
`run_here(..., defer=True)`, that work waits for `run_deferred`, which a daemon's worker calls
once its client has the exit code, and `exit_now` just before the process ends; anywhere else
(a command run in-process by a test, an evaluation) it runs at once.

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


_deferred: list[Callable[[], None]] | None = None
"""The tidying-up left for after the output (None: none is deferred, it runs at once)."""


def run_here(cli_main: Callable[[], None], *, defer: bool = False) -> int:
    """Run the command line in this process (through `cli_main`); its exit code. `defer`: the
    caller runs `run_deferred()` once the output is out (see the module's docstring)."""
    global _deferred
    if defer:
        _deferred = []
    try:
        cli_main()
    except SystemExit as exc:
        return exit_code(exc)
    return 0


def after_output(work: Callable[[], None]) -> None:
    """Run `work` once the command's output is complete: kept for run_deferred() when the
    command line runs deferring, else now."""
    if _deferred is None:
        work()
    else:
        _deferred.append(work)


def run_deferred() -> None:
    """Run the work after_output() kept, in order (its output is out: a failure, or Ctrl-C,
    is no longer the command's to report)."""
    global _deferred
    pending, _deferred = _deferred or [], None
    for work in pending:
        with contextlib.suppress(Exception, KeyboardInterrupt):
            work()


def exit_code(exc: SystemExit) -> int:
    """The status Python itself would exit with for this SystemExit."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def flush_output() -> None:
    """Flush what the command printed."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def finish() -> None:
    """Run the exit handlers and flush the output, as the end of the interpreter would. After
    run_deferred(): the exit handlers include the removal of temporary directories not yet
    removed (weakref finalizers), which deferred work may still be using."""
    atexit._run_exitfuncs()
    flush_output()


def exit_now(code: int) -> NoReturn:
    """Exit without the interpreter's teardown of every module (about 0.2 s once the SDKs are
    loaded). The command has returned, so every thread it waits for has been joined; one still
    running is abandoned (a request that hung when Ctrl-C came), as the normal exit would wait
    for it."""
    flush_output()
    run_deferred()
    finish()
    os._exit(code)
