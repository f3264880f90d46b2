"""A traced run of the tests on the unpatched code, in the sandbox: which lines of the
repository each test runs and where a failing one's traceback passes (the spectrum that fault
localisation ranks lines by, agent/mutation/localise.py).

The program that runs in the sandbox is tracer.py beside this file (read by path, never
imported on the host): pytest with a recording plugin, a `sys.settrace` line tracer limited to
the repository's own files (no coverage package: the sandbox images hold only the verifier
toolchain, and a tracer of ~150 lines runs on every Python an environment has). It runs as the
tests stage runs them: the same ids (or the files of the ids, for a task whose files run
whole), the task's pre-test commands, plugin autoload off, the environment's pytest plugins.
Not under the guard: nothing a candidate wrote runs here, only the unpatched repository.
Only pytest tasks are traced; another runner's task gets an empty spectrum and a note.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from functools import cache
from pathlib import Path, PurePosixPath

from ooda.agent.contracts.protocols import Sandbox
from ooda.agent.contracts.spectrum import Spectrum, TestTrace
from ooda.verifiers import pretest
from ooda.verifiers.pytest_check.parse import REPORT_DIR, read_report, run_target
from ooda.verifiers.pytest_check.run import (
    PYTEST_ENV,
    _report_dir,
    _reset_report_dir,
    pytest_command,
)
from ooda.verifiers.runners.request import NotGradable, TestRequest

PER_TEST_S = 5.0
"""A traced test running longer is interrupted (it fails, its traceback through the loop)."""
MAX_TRACE_BYTES = 256 * 1024 * 1024


@cache
def tracer_source() -> str:
    return Path(__file__).with_name("tracer.py").read_text(encoding="utf-8")


def trace_tests(sandbox: Sandbox, request: TestRequest, per_test_s: float = PER_TEST_S,
                runner_kind: str = "pytest") -> Spectrum:
    """Run `request`'s tests traced in `sandbox` (holding the unpatched code) and read what
    each test ran. A run cut short by `request.timeout_s` keeps the tests that finished
    (`complete` false). Raises NotGradable for a test command that is not a plain pytest call."""
    if runner_kind != "pytest":
        return Spectrum(note=f"tests run by {runner_kind} are not traced: tracebacks only")
    args = _pytest_args(request)
    started = time.monotonic()
    directory = _report_dir(sandbox.workspace)
    nonce = uuid.uuid4().hex
    workdir = sandbox.workdir.rstrip("/") or "/"
    in_dir = PurePosixPath(workdir) / REPORT_DIR
    (directory / f"tracer-{nonce}.py").write_text(tracer_source(), encoding="utf-8")
    out = f"trace-{nonce}.jsonl"
    argv = ["python3", "-s", "-B", str(in_dir / f"tracer-{nonce}.py"), str(in_dir / out),
            workdir, f"{per_test_s:g}", "-p", "no:cacheprovider", f"--rootdir={workdir}",
            "--continue-on-collection-errors", "-q", *args]
    wrapped, marker = pretest.wrap(argv, request.pre_test, PYTEST_ENV)
    try:
        result = sandbox.run(wrapped, timeout_s=max(request.timeout_s, 0.1), env=PYTEST_ENV)
        failed = pretest.failure(result.output, request.pre_test, marker)
        data = read_report(sandbox.workspace, out) or b""
    finally:
        _reset_report_dir(sandbox.workspace)
    traces, finished = _read(data[:MAX_TRACE_BYTES])
    duration = time.monotonic() - started
    if failed:
        return Spectrum(complete=False, note=f"pre-test command failed: {failed}",
                        duration_s=duration)
    note = "" if finished else (
        f"the traced run did not finish within {request.timeout_s:.0f} s: "
        f"{len(traces)} test(s) kept" if result.timed_out else
        f"the traced run ended without finishing (exit code {result.exit_code}): "
        f"{len(traces)} test(s) kept; {shlex.quote(result.output[-300:])}")
    return Spectrum(tuple(traces), finished, note, duration)


def _pytest_args(request: TestRequest) -> list[str]:
    if request.ids:
        if request.whole_files:
            return list(dict.fromkeys(run_target(i).split("::", 1)[0] for i in request.ids))
        return list(dict.fromkeys(run_target(i) for i in request.ids))
    command = request.command or request.runner_cmd
    parsed = pytest_command(command) if command else None
    if parsed is None:
        raise NotGradable("only a plain pytest run can be traced")
    return parsed[0]


def _read(data: bytes) -> tuple[list[TestTrace], bool]:
    """The traces in the tracer's JSON lines, and whether its closing line is there."""
    traces: list[TestTrace] = []
    finished = False
    for raw in data.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue  # the line being written when the run was cut
        if not isinstance(record, dict):
            continue
        if "exit_code" in record:
            finished = True
            continue
        try:
            traces.append(TestTrace(
                test_id=str(record["id"]),
                outcome=str(record["outcome"]),
                lines={str(p): frozenset(int(n) for n in ns)
                       for p, ns in dict(record["lines"]).items()},
                frames=tuple((str(p), int(n)) for p, n in record["frames"]),
                duration_s=float(record.get("duration", 0.0)),
            ))
        except (KeyError, TypeError, ValueError):
            continue
    return traces, finished
