"""The `ooda` console script: hand the command to a warm daemon when one is ready, else run it
here (and start a daemon for next time), and skip the interpreter's slow teardown at the end.

`python -m ooda.agent.cli` runs the command line here, always, without a daemon.
"""

from __future__ import annotations

import os
import sys

from ooda.agent.startup import handoff

TYPE_CHECKING = False
if TYPE_CHECKING:  # (`typing`, `pathlib`, `contextlib` cost every command a few ms of import)
    from collections.abc import Callable, Sequence
    from pathlib import Path
    from typing import NoReturn

    from ooda.agent.contracts.protocols import Sandbox
    from ooda.agent.sandbox.docker.launch import Launched


SPAWN_AFTER = (0, 1)
"""Exit codes of a command that ran (a patch found, or none within the budget): the next one
is likely to follow, so a daemon is started for it. Bad input (2), a broken machine (3) or
Ctrl-C (130) start nothing: the user is still correcting the command line or the machine."""


def main() -> NoReturn:
    """The console script's entry point."""
    argv = sys.argv[1:]
    use_daemon = handoff.routed(argv) and handoff.enabled()
    if use_daemon:
        try:
            served = handoff.run_in_daemon(sys.argv)
        except handoff.NoDaemon:
            pass
        except KeyboardInterrupt:  # before the worker was known (the daemon interrupts it)
            print("ooda: error: interrupted", file=sys.stderr)
            raise SystemExit(130) from None
        else:
            _exit_served(served)
    from ooda.agent.startup import client as daemon_client
    from ooda.agent.support.exits import exit_now

    code = run_here(defer=True)  # (exit_now runs what it deferred)
    if use_daemon and code in SPAWN_AFTER:
        try:
            daemon_client.spawn()
        except OSError:
            pass
        else:
            if sys.stderr.isatty():  # say so where a person reads it (issue 15.11)
                print("ooda: started a background daemon so that the next commands start fast "
                      "(`ooda daemon stop` ends it; OODA_DAEMON=0 turns it off)", file=sys.stderr)
    exit_now(code)


def _exit_served(code: int) -> NoReturn:
    """The daemon's worker ran the command: exit with its code, without the interpreter's
    teardown (as agent/support/exits.exit_now; nothing was deferred or registered here)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: S110 - a closed or broken stream: nothing left to say
            pass
    os._exit(code)


def run_here(
    *, launched: Sequence[tuple[Path, Launched]] = (), leftovers_cleaned: bool = False,
    defer: bool = False, give_back: Callable[[Path, Sandbox], bool] | None = None,
) -> int:
    """Run the command line of sys.argv in this process, with start-up's commands and head
    start (agent/startup/prestart.py; `launched`: containers already started, the daemon's
    warm ones, which `give_back` takes back once the run is done with them; `leftovers_cleaned`:
    the daemon removes dead invocations' containers itself);
    its exit code. `defer`: the command's tidying-up waits for the caller's
    `run_deferred()` (agent/support/exits.py), after the output."""
    # here, not at the top: the console script's first imports stay built-in modules only
    # (a command the daemon serves never needs them in this process)
    from ooda.agent.cli import app as cli
    from ooda.agent.startup import commands, prestart
    from ooda.agent.support.exits import run_here as run_function

    commands.register(cli.app)
    started = prestart.begin(sys.argv[1:], launched=launched,
                             leftovers_cleaned=leftovers_cleaned, give_back=give_back)
    return run_function(lambda: cli.main(prestarted=started), defer=defer)
