"""The reproduction-test stage of a blind run: the scripts the model wrote from the issue text
(agent/core/repro_prompt.py), each run in the sandbox from the repository root.

A reproduction test is a standalone Python script: it fails with an AssertionError while the
issue is present and exits normally once it is fixed. Each runs under a small wrapper
(`python3 -s -B -c WRAPPER SCRIPT MARK`) that executes it as `__main__` and prints, last, a
line holding a fresh random mark and the outcome: `ok`, or the name of the exception that ended
it. Outcomes: passed (exit 0 and `ok`), failed (AssertionError), error (any other exception,
or no result line: the script killed its own interpreter), timeout.

A probe (the issue's own examples, verifiers/issue_probes.py) runs the same way but is never
passed or failed: the stage records its output's fingerprint per block beside the base's
(`details["probes"]`), for the blind selection to compare candidates by.

The same function judges the scripts on the unpatched code (agent/verify/repro_suite.py keeps
those that fail there) and on every candidate. The stage runs last (`after_tests`, after
security and mypy, on the fresh copy the task verifier gives them), as it runs candidate code;
the host writes each script again right before it runs. Like django's and sympy's runners,
a script is graded from its own output, not under pytest's guard: its verdict ranks a blind
run's candidates, the hidden tests judge the one submitted (docs/SWEBENCH.md).
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from ooda.agent.contracts.protocols import (
    CheckSpec,
    ReproTest,
    Sandbox,
    VerifierResult,
    VerifierStatus,
)
from ooda.agent.support.fstree import remove_workspace
from ooda.verifiers import clip, pretest, tail
from ooda.verifiers.issue_probes import behaviour
from ooda.verifiers.settings import StageSettings

REPRO_DIR = ".ooda-repro"
"""Where the scripts are written in a workspace (emptied before each is written)."""

SCRIPT_TIMEOUT_S = 30.0
"""Most seconds one script may run (less when the stage has less)."""

WRAPPER = """\
import os, runpy, sys, traceback
path, mark = sys.argv[1], sys.argv[2]
sys.argv[:] = [path]
outcome = "ok"
try:
    runpy.run_path(path, run_name="__main__")
except SystemExit as exc:
    if exc.code not in (None, 0):
        outcome = "SystemExit"
        print("SystemExit: %r" % (exc.code,))
except BaseException as exc:
    traceback.print_exc()
    outcome = type(exc).__name__
sys.stdout.flush()
sys.stderr.flush()
sys.stdout.write("\\n%s %s\\n" % (mark, outcome))
sys.stdout.flush()
os._exit(0 if outcome == "ok" else 1)
"""
"""Runs one script as __main__ and says how it ended (Python 3.5 and later: SWE-bench's
environments run old Pythons)."""

ScriptStatus = Literal["passed", "failed", "error", "timeout"]


@dataclass(frozen=True)
class ScriptRun:
    """How one reproduction test ended."""

    name: str
    status: ScriptStatus
    exception: str
    """The exception that ended it ("" when it passed or timed out)."""
    output: str
    """Its output, the wrapper's result line removed."""
    duration_s: float


def run_script(sandbox: Sandbox, test: ReproTest, timeout_s: float,
               pre_test: list[str] | None = None) -> ScriptRun:
    """Run `test` in `sandbox` from the repository root (the task's pre-test commands first)."""
    directory = _fresh_dir(sandbox.workspace)
    (directory / f"{test.name}.py").write_text(test.source, encoding="utf-8")
    workdir = PurePosixPath(sandbox.workdir.rstrip("/") or "/")
    mark = "ooda-repro-" + secrets.token_hex(8)
    argv = ["python3", "-s", "-B", "-c", WRAPPER, str(workdir / REPRO_DIR / f"{test.name}.py"),
            mark]
    wrapped, nonce = pretest.wrap(argv, pre_test or [])
    started = time.monotonic()
    result = sandbox.run(wrapped, timeout_s=max(timeout_s, 0.1))
    duration = result.duration_s or time.monotonic() - started
    remove_workspace(directory)
    if result.timed_out:
        return ScriptRun(test.name, "timeout", "", result.output, duration)
    failed = pretest.failure(result.output, pre_test or [], nonce)
    if failed:
        return ScriptRun(test.name, "error", "pre-test command failed", failed, duration)
    outcome, output = _outcome(result.output, mark)
    if outcome == "ok" and result.exit_code == 0:
        return ScriptRun(test.name, "passed", "", output, duration)
    if outcome == "AssertionError":
        return ScriptRun(test.name, "failed", outcome, output, duration)
    why = outcome or (f"the script ended without a result (exit code {result.exit_code})"
                      if result.limit is None else result.limit)
    return ScriptRun(test.name, "error", why, output, duration)


class ReproVerifier:
    """Runs the check's reproduction tests; passes when every required one passes."""

    name = "repro"

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        started = time.monotonic()
        tests = list(check.reproduction)
        if not tests:
            return VerifierResult(self.name, "skipped", 0.0, "", "no reproduction test")
        runs: list[ScriptRun] = []
        for test in tests:
            left = check.timeout_s - (time.monotonic() - started)
            if left <= 0:
                runs.append(ScriptRun(test.name, "timeout", "", "", 0.0))
                continue
            runs.append(run_script(sandbox, test, min(SCRIPT_TIMEOUT_S, left), check.pre_test))
        by_name = {t.name: t for t in tests}
        probes = {r.name: r for r in runs if by_name[r.name].probe}
        runs = [r for r in runs if r.name not in probes]
        bad = [r for r in runs if r.status != "passed" and by_name[r.name].required]
        details: dict[str, object] = {
            "outcomes": {r.name: r.status for r in runs},
            "required": [t.name for t in tests if t.required and not t.probe],
            "probes": {name: {"behaviour": _behaviour(run),
                              "base": list(by_name[name].base_behaviour)}
                       for name, run in probes.items()},
        }
        log = "\n\n".join(f"== {r.name}: {r.status} {r.exception}\n{r.output}"
                          for r in [*runs, *probes.values()])
        duration = time.monotonic() - started
        if not bad:
            return VerifierResult(self.name, "passed", duration, "", log, details)
        required = sum(1 for t in tests if t.required)
        head = (f"{len(bad)} of {required} reproduction tests (scripts written from the issue, "
                "which fail on the unpatched code) still fail with this change:")
        parts = [head]
        for run in bad:
            parts.append(f"\n{run.name} ({_said(run)}); the script:\n```python\n"
                         f"{clip(by_name[run.name].source.strip(), 1200)}\n```\n"
                         f"its output:\n{tail(run.output.strip(), 600)}")
        status: VerifierStatus = (
            "timeout" if all(r.status == "timeout" for r in bad) else "failed")
        return VerifierResult(self.name, status, duration, clip("\n".join(parts), 3000), log,
                              details)


def _behaviour(run: ScriptRun) -> list[str]:
    """A probe's fingerprint per block it reached; a block a timeout cut short: "timeout"."""
    prints = behaviour(run.output)
    if run.status == "timeout" and prints:
        prints[-1] = "timeout"
    return prints


def _said(run: ScriptRun) -> str:
    if run.status == "timeout":
        return "did not finish in time"
    return f"ended with {run.exception}" if run.exception else run.status


def _outcome(output: str, mark: str) -> tuple[str, str]:
    """(the outcome after the last mark line, or "" when there is none; the output without
    that line)."""
    index = output.rfind(mark + " ")
    if index < 0:
        return "", output
    line_end = output.find("\n", index)
    line = output[index: line_end if line_end >= 0 else len(output)]
    outcome = line[len(mark) + 1:].strip()
    rest = output[:index].rstrip("\n")
    return outcome, rest


def _fresh_dir(workspace: Path) -> Path:
    """An empty .ooda-repro/ owned like the workspace root (the sandbox user reads it)."""
    directory = workspace / REPRO_DIR
    if directory.is_symlink() or directory.is_file():
        directory.unlink()
    elif directory.exists():
        remove_workspace(directory)
    directory.mkdir(mode=0o755)
    info = workspace.stat()
    if os.geteuid() == 0 and (info.st_uid, info.st_gid) != (0, 0):
        os.chown(directory, info.st_uid, info.st_gid)
    return directory


def stage(settings: StageSettings) -> ReproVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return ReproVerifier()
