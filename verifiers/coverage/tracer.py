"""Runs inside the sandbox, never imported on the host: pytest with a plugin that records, for
each test, its outcome, the lines of the repository's own files it ran and, when it failed,
where its traceback passed through them; one JSON line per test, written as the test ends (a
run cut short keeps the tests that finished).

Usage: python3 -s -B tracer.py OUT ROOT PER_TEST_S PYTEST_ARGS...

A test that uses more than PER_TEST_S of CPU time (SIGPROF), or blocks for WALL_FACTOR times
that on the clock (SIGALRM), is interrupted with `TracedTestTimeout`, so a test that loops
forever ends (outcome "timeout") with a traceback through the loop instead of hanging the run;
after two such tests the limit is a tenth (a suite whose every test loops). CPU time, not the
clock, so a loaded machine does not turn a quick test into a "timeout".
Written for every Python a task's environment may have (3.7 on, as the guard).
The process ends with `os._exit`, so atexit handlers of the code under test never run.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from types import FrameType
from typing import IO, TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:  # (collections.abc's generics are not subscriptable before 3.9)
    from collections.abc import Callable, Generator

    Tracer = Callable[[FrameType, str, Any], Any]

_exit = os._exit
MAX_FRAMES = 30
"""A traceback's first and last frames kept (of the repository's, each once)."""
WALL_FACTOR = 4
"""A test blocked (sleeping, waiting) is stopped at this many times its CPU limit on the clock."""


class TracedTestTimeout(Exception):
    """A test ran past the tracer's per-test limit."""


class Recorder:
    """The pytest plugin: per test, lines run, outcome and traceback frames."""

    def __init__(self, root: str, out: IO[str], per_test_s: float) -> None:
        self.root = os.path.realpath(root) + os.sep
        self.out = out
        self.per_test_s = per_test_s
        self.timeouts = 0
        self.names: dict[str, str | None] = {}  # co_filename -> path relative to root, or None: not the repository's
        self.reset()

    def reset(self) -> None:
        self.lines: dict[str, set[int]] = {}  # relative path -> line numbers run
        self.tracers: dict[str, Tracer] = {}  # relative path -> its local trace function
        self.outcome = "passed"
        self.frames: list[list[Any]] = []

    def relative(self, filename: str) -> str | None:
        try:
            return self.names[filename]
        except KeyError:
            pass
        path = os.path.realpath(os.path.abspath(filename))
        rel = None
        if (path.startswith(self.root) and path.endswith(".py")
                and "site-packages" not in path and "/.ooda/" not in path):
            rel = path[len(self.root):]
        self.names[filename] = rel
        return rel

    def trace(self, frame: FrameType, event: str, arg: Any) -> Tracer | None:
        rel = self.relative(frame.f_code.co_filename)
        if rel is None:
            return None
        tracer = self.tracers.get(rel)
        if tracer is None:
            tracer = self.tracers[rel] = _line_tracer(self.lines.setdefault(rel, set()))
        return tracer

    def limit(self) -> float:
        return self.per_test_s if self.timeouts < 2 else max(0.25, self.per_test_s / 10)

    def on_alarm(self, signum: int, frame: Any) -> None:
        limit = self.limit()
        self.timeouts += 1
        self.outcome = "timeout"
        if signum == signal.SIGPROF:
            raise TracedTestTimeout(f"used more than {limit:g} s of CPU while traced")
        raise TracedTestTimeout(f"ran longer than {limit * WALL_FACTOR:g} s while traced")

    # ---------------------------------------------------------------- pytest hooks

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Generator[None, None, None]:
        self.reset()
        started = time.time()
        previous = signal.signal(signal.SIGALRM, self.on_alarm)
        previous_prof = signal.signal(signal.SIGPROF, self.on_alarm)
        signal.setitimer(signal.ITIMER_PROF, self.limit())
        signal.setitimer(signal.ITIMER_REAL, self.limit() * WALL_FACTOR)
        threading.settrace(self.trace)
        sys.settrace(self.trace)
        try:
            yield
        finally:
            sys.settrace(None)
            threading.settrace(None)
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.setitimer(signal.ITIMER_PROF, 0)
            signal.signal(signal.SIGALRM, previous)
            signal.signal(signal.SIGPROF, previous_prof)
            self.write(item.nodeid, time.time() - started)

    def pytest_runtest_logreport(self, report: Any) -> None:
        if self.outcome == "timeout":
            return
        if report.failed:
            self.outcome = "failed" if report.when == "call" else "error"
        elif report.skipped and report.when in ("setup", "call") and self.outcome == "passed":
            self.outcome = "skipped"

    def pytest_exception_interact(self, node: Any, call: Any, report: Any) -> None:
        tb = getattr(call.excinfo, "tb", None)
        frames: list[list[Any]] = []
        while tb is not None:
            rel = self.relative(tb.tb_frame.f_code.co_filename)
            if rel is not None and [rel, tb.tb_lineno] not in frames[-MAX_FRAMES:]:
                frames.append([rel, tb.tb_lineno])  # a recursion's frames once
            tb = tb.tb_next
        frames = frames[:MAX_FRAMES] + frames[-MAX_FRAMES:] if len(frames) > 2 * MAX_FRAMES \
            else frames
        if frames and not self.frames:
            self.frames = frames

    def write(self, nodeid: str, duration: float) -> None:
        record = {
            "id": nodeid,
            "outcome": self.outcome,
            "duration": round(duration, 4),
            "lines": {path: sorted(lines) for path, lines in self.lines.items()},
            "frames": self.frames,
        }
        self.out.write(json.dumps(record) + "\n")
        self.out.flush()


def _line_tracer(lines: set[int]) -> Tracer:
    """A local trace function that adds each line it sees run to `lines`."""
    add = lines.add

    def local(frame: FrameType, event: str, arg: Any) -> Tracer:
        if event == "line":
            add(frame.f_lineno)
        return local

    return local


def main(argv: list[str]) -> None:
    out_path, root, per_test_s = argv[0], argv[1], float(argv[2])
    pytest_args = argv[3:]
    sys.path[0] = os.getcwd()  # as `python -m pytest` has it (not this script's directory)
    plugins = [p for p in os.environ.get("OODA_PYTEST_PLUGINS", "").split(",") if p]
    pytest_args = [word for p in plugins for word in ("-p", p)] + pytest_args
    code = 3
    with open(out_path, "w") as out:
        recorder = Recorder(root, out, per_test_s)
        try:
            code = int(pytest.main(pytest_args, plugins=[recorder]))
        finally:
            out.write(json.dumps({"exit_code": code}) + "\n")
            out.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    _exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
