"""Run a host process in its own session, capped output, killing the whole tree on timeout."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

from ooda.agent.contracts.protocols import ExecResult
from ooda.agent.sandbox.output import DEFAULT_CAP_BYTES, CappedBuffer

CHECK_EVERY_S = 0.2
"""How often run_process asks its `check` while the command runs."""


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    check: Callable[[], str | None] | None = None,
    umask: int = -1,
) -> ExecResult:
    """Run argv in a new session; on timeout SIGKILL its whole process group.

    `check`, when given, is called every CHECK_EVERY_S while the command runs and once after it
    ended: a line it returns (a limit the command broke) kills the group and ends the output.
    `umask`, when not -1, is the command's (a sandbox sets the usual 022, whatever ours is)."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        umask=umask,
    )
    buffer = CappedBuffer(cap_bytes)
    assert proc.stdout is not None
    stdout = cast(io.BufferedReader, proc.stdout)

    def pump() -> None:
        for chunk in iter(lambda: stdout.read1(65536), b""):
            buffer.write(chunk)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    timed_out = False
    broke: str | None = None
    deadline = start + max(timeout_s, 0.0)
    try:
        while (left := deadline - time.monotonic()) > 0:
            try:
                proc.wait(timeout=min(left, CHECK_EVERY_S) if check else left)
                break
            except subprocess.TimeoutExpired:
                if check is not None and (broke := check()) is not None:
                    break
        else:
            timed_out = True
    finally:
        kill_group(proc.pid)
        proc.wait()
    reader.join(timeout=2.0)
    stdout.close()
    if broke is None and check is not None and not timed_out:
        broke = check()
    output = buffer.text()
    if broke is not None:
        return ExecResult(proc.returncode if proc.returncode > 0 else 137,
                          f"{output.rstrip()}\n{broke}\n".lstrip(), time.monotonic() - start)
    return ExecResult(
        exit_code=None if timed_out else proc.returncode,
        output=output,
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group (children that outlived their parent too)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
