"""`ooda daemon status|start|stop`: start-up's own commands, registered on the command line's
typer app by start-up (agent/startup/entry.py, the daemon) so that cli never imports start-up."""

from __future__ import annotations

import json
import time
from typing import Annotated

import typer

from ooda.agent.cli.options import JsonOpt
from ooda.agent.contracts.errors import InfraError, UsageError
from ooda.agent.startup import client as daemon_client
from ooda.agent.startup import handoff

daemon_app = typer.Typer(
    help="The warm daemon that serves run/verify/eval/ci with the SDKs already imported and a "
    "sandbox container already started (started by the first such command; OODA_DAEMON=0 "
    "turns it off; it exits after OODA_DAEMON_IDLE_S idle seconds, default 1800).",
    no_args_is_help=True,
)


def register(app: typer.Typer) -> None:
    """Add the `daemon` group to `app` (once)."""
    if not any(group.typer_instance is daemon_app for group in app.registered_groups):
        app.add_typer(daemon_app, name="daemon")


AllOpt = Annotated[bool, typer.Option("--all", help="Every daemon of this user (each "
                                      "installation and environment), not only this one's.")]


@daemon_app.command("status")
def daemon_status(json_out: JsonOpt = False, every: AllOpt = False) -> None:
    """Say whether a daemon serves this installation and environment (exit 1 if none); the
    user's other daemons, started with another environment or installation, are named too."""
    status = daemon_client.control("status")
    others = [d for d in daemon_client.all_daemons()
              if status is None or d.get("key") != status.get("key")]
    if json_out:
        print(json.dumps(([status] if status else []) + others if every else status))
    else:
        if status is None:
            print("no ooda daemon for this installation and environment")
        else:
            print(f"ooda daemon pid {status['pid']}: {status['served']} command(s) served, "
                  f"{status['running']} running, warm container: {status['warm_container']}")
        for other in others:
            print(f"another ooda daemon of yours, pid {other['pid']}: "
                  f"{daemon_client.why_not_mine(other) or 'same key'}")
        if others:
            print("(`ooda daemon stop --all` stops them all)")
    raise SystemExit(0 if status is not None or (every and others) else 1)


@daemon_app.command("start")
def daemon_start(
    timeout: Annotated[float, typer.Option(help="Seconds to wait for it to be ready.")] = 60.0,
) -> None:
    """Start the daemon now (instead of after the next command) and wait until it is ready."""
    if not handoff.enabled():
        raise UsageError("the daemon is turned off here (OODA_DAEMON=0)")
    if daemon_client.control("status") is None:
        daemon_client.spawn()
    deadline = time.monotonic() + timeout
    while (status := daemon_client.control("status")) is None:
        if time.monotonic() > deadline:
            log = daemon_client.paths(handoff.daemon_key())["log"]
            raise InfraError(f"the ooda daemon did not start within {timeout:g} s (see {log})")
        time.sleep(0.1)
    print(f"ooda daemon pid {status['pid']} ready")


@daemon_app.command("stop")
def daemon_stop(every: AllOpt = False) -> None:
    """Stop this installation's daemons, whichever terminal started them (their environment
    may differ from this shell's); with --all, every daemon of this user. Commands they are
    running finish first."""
    status = daemon_client.control("stop")
    stopped = [status] if status is not None else []
    left = []
    for other in daemon_client.all_daemons():
        if status is not None and other.get("pid") == status.get("pid"):
            continue
        if every or daemon_client.same_installation(other):
            answer = daemon_client.control("stop", socket_path=str(other["socket"]))
            if answer is not None:
                stopped.append(answer)
                why = daemon_client.why_not_mine(other)
                print(f"stopped ooda daemon pid {other['pid']}" + (f" ({why})" if why else ""))
        else:
            left.append(other)
    if not stopped:
        print("no ooda daemon of this installation was running")
    else:
        print("stopped" if len(stopped) == 1 else f"stopped {len(stopped)} daemons")
    for other in left:
        print(f"left running: ooda daemon pid {other['pid']} "
              f"({daemon_client.why_not_mine(other)}; `ooda daemon stop --all` stops it)")
