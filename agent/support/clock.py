"""When the command started, on the machine's monotonic clock: the moment its process started
(Linux: /proc/self/stat), or, in a daemon's worker, the moment its client started. Its own
module, on built-in modules only: the console script reads it before handing a command to a
daemon (agent/startup/handoff.py); agent/support/phases.py counts the command's phases from it.
"""

from __future__ import annotations

import os
import time

_command_start: float | None = None


def set_command_start(monotonic: float) -> None:
    """The command started at `monotonic` (a daemon's worker: when its client started)."""
    global _command_start
    _command_start = monotonic


def command_start() -> float:
    """When this command started, on the monotonic clock: as set, else this process's start."""
    if _command_start is not None:
        return _command_start
    return time.monotonic() - process_age()


def process_age() -> float:
    """Seconds since this process started (0.0 where /proc cannot say)."""
    try:
        with open("/proc/self/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # starttime: field 22, in clock ticks after boot
        started = ticks / os.sysconf("SC_CLK_TCK")
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
