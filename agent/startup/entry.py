"""The `ooda` console script: hand the command to a warm daemon when one is ready, else run it
here (and start a daemon for next time), and skip the interpreter's slow teardown at the end.

`python -m ooda.agent.cli` runs the command line here, always, without a daemon.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
from collections.abc import Callable
from typing import NoReturn

from ooda.agent.startup import client as daemon_client


def main() -> NoReturn:
    """The console script's entry point."""
    argv = sys.argv[1:]
    use_daemon = daemon_client.routed(argv) and daemon_client.enabled()
    if use_daemon:
        try:
            raise SystemExit(daemon_client.run_in_daemon(sys.argv))
        except daemon_client.NoDaemon:
            pass
        except KeyboardInterrupt:  # before the worker was known (the daemon interrupts it)
            print("ooda: error: interrupted", file=sys.stderr)
            raise SystemExit(130) from None
    code = run_here()
    if use_daemon:
        with contextlib.suppress(OSError):
            daemon_client.spawn()
    exit_now(code)


def run_here(cli_main: Callable[[], None] | None = None) -> int:
    """Run the command line in this process (through `cli_main`, default ooda.agent.cli.app.main); its
    exit code."""
    if cli_main is None:
        from ooda.agent.cli.app import main

        cli_main = main
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
