"""Run a host process in its own session, capped output, killing the whole tree on timeout."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

from agent.protocols import ExecResult
from agent.sandbox.output import DEFAULT_CAP_BYTES, CappedBuffer


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path | str,
    env: Mapping[str, str],
    timeout_s: float,
    cap_bytes: int = DEFAULT_CAP_BYTES,
    preexec_limits: bool = False,
) -> ExecResult:
    """Run argv in a new session; on timeout SIGKILL its whole process group."""
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
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
    try:
        proc.wait(timeout=max(timeout_s, 0.0))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(proc.pid)
        proc.wait()
    reader.join(timeout=2.0)
    stdout.close()
    return ExecResult(
        exit_code=None if timed_out else proc.returncode,
        output=buffer.text(),
        duration_s=time.monotonic() - start,
        timed_out=timed_out,
    )


def kill_group(pgid: int) -> None:
    """SIGKILL every process left in the group (children that outlived their parent too)."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
