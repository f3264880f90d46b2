"""The reproduction-test stage of a blind run: the scripts the model wrote from the issue text
(agent/core/repro_prompt.py), each run in the sandbox from the repository root.

A reproduction test is a standalone Python script: it fails with an AssertionError while the
issue is present and exits normally once it is fixed. Each runs under a small wrapper
(`python3 -s -B -c WRAPPER SCRIPT MARK_FILE`) that executes it as `__main__` and prints, last, a
line holding a fresh random mark (read from MARK_FILE, deleted before the script runs) and the
outcome: `ok` only when the script reached its end (WRAPPER says what that is), else the name of
the exception that ended it. Outcomes: passed (exit 0 and `ok`), failed (AssertionError), error
(any other exception, a SystemExit that was not the script's own ending, or no result line: the
process was killed), timeout.

A probe (the issue's own examples, verifiers/issue_probes.py) runs the same way but is never
passed or failed: the stage records its output's fingerprint per block beside the base's
(`details["probes"]`), for the blind selection to compare candidates by.

The same function judges the scripts on the unpatched code (agent/verify/repro_suite.py keeps
those that fail there) and on every candidate. The stage runs last (`after_tests`, after
security and mypy, on the fresh copy the task verifier gives them), as it runs candidate code;
the host writes each script again right before it runs. A script is graded from the wrapper's
result line, not under pytest's guard: its verdict ranks a blind run's candidates, the hidden
tests judge the one submitted (docs/SWEBENCH.md, docs/SECURITY.md).
"""

from __future__ import annotations

import json
import os
import secrets
import time
from collections.abc import Mapping, Sequence
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
from ooda.verifiers.runners.output import harness_source
from ooda.verifiers.settings import StageSettings

REPRO_DIR = ".ooda-repro"
"""Where the scripts are written in a workspace (emptied before each is written)."""

SCRIPT_TIMEOUT_S = 30.0
"""Most seconds one script may run (less when the stage has less)."""

WRAPPER = """\\
import ast, json, os, runpy, sys, traceback, unittest


def _main(path, mark_file, write=os.write, end=os._exit, print_exc=traceback.print_exc,
          realpath=os.path.realpath, relpath=os.path.relpath, getframe=sys._getframe):
    # everything the wrapper keeps or calls once the script has run is a local or captured here,
    # before any repository code runs: the mark is in no module's namespace, and replacing a
    # module's function (traceback.print_exc, print) does not change what runs at the end
    with open(mark_file) as handle:
        config = json.load(handle)
    os.unlink(mark_file)
    mark = config["mark"]
    changed = frozenset(realpath(name) for name, first, last in config.get("changed_lines", ()))
    probe = None
    if config.get("probe"):  # the recording harness's probes (verifiers/runners/harness.py)
        import importlib.util
        spec = importlib.util.spec_from_file_location("_ooda_repro_probe", config["probe"])
        probe = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(probe)
        os.unlink(config["probe"])
        probe.prepare_probes(config)
        runpy.compile = probe._comparing_compile  # the script's comparisons: probed, then made
    del config
    # as the tests' interpreter has it: pytest loaded and its variable set (code that is right
    # only when pytest is not loaded, or not running a test, fails here as there)
    try:
        import pytest  # noqa: F401
    except Exception:
        pass
    os.environ.setdefault("PYTEST_CURRENT_TEST", "%s::repro (call)" % os.path.basename(path))
    sys.argv[:] = [sys.argv[1]]
    workspace = realpath(os.getcwd()) + os.sep

    def enders():
        return (sys.exit, getattr(__builtins__, "exit", None), getattr(__builtins__, "quit", None),
                unittest.main, getattr(unittest.main, "__init__", None))

    exits = enders()
    traced, searched, busy = [], [], []
    frame_reads = ("sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                   "gc.get_referents")

    def audit(event, args):
        # a trace or profile function set by code other than the script: a tracer can move the
        # script's frame past a failing line (`frame.f_lineno = ...`), so the end it reaches is
        # not the script's own
        if event in ("sys.settrace", "sys.setprofile") and not traced:
            caller = getframe(1)
            if realpath(caller.f_code.co_filename) != path:
                traced.append("%s from %s" % (event, caller.f_code.co_filename))
        # the patch's code reading frames or the heap (directly or through one helper): it could
        # reach the wrapper's state, the mark included, and print a result of its own; the read
        # is refused (raising here makes the call raise) and the run cannot pass
        elif changed and not busy and (event in frame_reads or (
                event == "object.__getattr__" and args[1] in ("tb_frame", "gi_frame", "cr_frame",
                                                              "ag_frame"))):
            busy.append(1)
            try:
                caller = getframe(1)
                for _ in range(2):
                    if caller is None:
                        break
                    if realpath(caller.f_code.co_filename) in changed:
                        searched.append("%s from %s" % (
                            event if event != "object.__getattr__" else args[1],
                            relpath(caller.f_code.co_filename)))
                        raise RuntimeError("ooda's reproduction-script wrapper: %s is refused "
                                           "to the code under test" % (searched[-1],))
                    caller = caller.f_back
            finally:
                busy.pop()

    if hasattr(sys, "addaudithook"):  # Python 3.8 and later
        sys.addaudithook(audit)

    def exit_lines():
        # the lines of the script's own top-level statements that end it: sys.exit(...), exit(),
        # quit(), unittest.main(), raise SystemExit (at module level, in `if __name__ ==
        # "__main__":` & co.)
        with open(path, "rb") as handle:
            tree = ast.parse(handle.read())
        lines, todo = set(), list(tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, None) or [])
            call = getattr(node, "value", None) if isinstance(node, ast.Expr) else None
            func = getattr(call, "func", None) if isinstance(call, ast.Call) else None
            named = getattr(func, "id", None) or getattr(func, "attr", None)
            owner = getattr(getattr(func, "value", None), "id", None)
            raised = getattr(node, "exc", None) if isinstance(node, ast.Raise) else None
            raised = getattr(raised, "func", raised)
            if (named in ("exit", "quit") or (named == "main" and owner == "unittest")
                    or getattr(raised, "id", None) == "SystemExit"):
                lines.update(range(node.lineno, getattr(node, "end_lineno", node.lineno) + 1))
        return lines

    try:  # read before the script runs (the code under test cannot change it then)
        lines = exit_lines()
    except Exception:  # a script that does not parse: runpy says why below
        lines = set()
    said = []

    def ended_by_script(exc):
        # a SystemExit(0) is the script's own ending when no frame of the workspace other than
        # the script is on its way and the script raised it at the top level, from a statement
        # that ends it, with sys.exit as it was
        trace, last = exc.__traceback__, None
        while trace is not None:
            code = trace.tb_frame.f_code
            name = "" if code.co_filename.startswith("<") else realpath(code.co_filename)
            if name == path:
                last = trace
            elif name.startswith(workspace):
                said.append("SystemExit(%r) raised through %s, not by the script: it did not "
                            "reach its end" % (exc.code, relpath(name)))
                return False
            trace = trace.tb_next
        if last is None or any(a is not b for a, b in zip(exits, enders())):
            said.append("SystemExit(%r) not raised by the script: it did not reach its end"
                        % (exc.code,))
            return False
        if last.tb_frame.f_code.co_name != "<module>" or last.tb_lineno not in lines:
            said.append("SystemExit(%r) raised at line %d of the script, not by a statement "
                        "that ends it" % (exc.code, last.tb_lineno))
            return False
        return True

    outcome = "ok"
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code not in (None, 0):
            outcome = "SystemExit"
            said.append("SystemExit: %r" % (exc.code,))
        elif not ended_by_script(exc):
            outcome = "SystemExit-not-the-script-s"
    except BaseException as exc:
        outcome = type(exc).__name__
        try:
            print_exc()
        except BaseException:
            pass
    if outcome == "ok" and traced:
        outcome = "traced"
        said.append("%s (a trace function can skip the script's lines): it did not reach its end "
                    "by itself" % traced[0])
    if outcome == "ok" and searched:
        outcome = "searched"
        said.append("the code under test read the process's frames or heap (%s): it can reach "
                    "the wrapper's own state" % searched[0])
    if outcome == "ok" and probe is not None:
        import builtins
        if probe.decided:
            outcome = "decided"
            said.append("a %s, whose comparison the patch wrote, said it equals a value it was "
                        "never given: it decides by what it meets, not by its value"
                        % probe.decided[0])
        elif (builtins.__dict__.get(probe.COMPARE_NAME) not in (None, probe.compare)
              or runpy.__dict__.get("compile") is not probe._comparing_compile):
            outcome = "decided"
            said.append("the probes of the script's comparisons were replaced while it ran")
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BaseException:
            pass
    text = "".join(line + "\\n" for line in said) + "\\n%s %s\\n" % (mark, outcome)
    data = text.encode("utf-8", "replace")
    while data:
        data = data[write(1, data):]
    end(0 if outcome == "ok" else 1)


_main(os.path.realpath(sys.argv[1]), sys.argv[2])
"""
"""Runs one script as __main__ and says how it ended (Python 3.5 and later: SWE-bench's
environments run old Pythons). A script counts only when it reached its end: it returned, or
a top-level statement of its own that ends it (`sys.exit(0)`, `exit()`, `unittest.main()`,
`raise SystemExit`) raised SystemExit(0) with those functions as they were; a SystemExit that went through the code under
test (a module that exits when pytest is not loaded), or came from a line that is no such
statement (a builtin the code under test replaced), is not the script's success. The result line's mark is read from a file the wrapper deletes before
the script runs: it is on no command line (`/proc/self/cmdline`) the code under test could
read and print with an `ok` before ending the process."""

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
               pre_test: list[str] | None = None,
               changed: Mapping[str, Sequence[tuple[int, int]]] | None = None) -> ScriptRun:
    """Run `test` in `sandbox` from the repository root (the task's pre-test commands first).
    `changed`: the candidate's changed files, each with the lines its patch wrote (none: the
    whole file): a value whose class compares by those lines is asked about values it was
    never given before the script's comparisons (the harness's probes)."""
    directory = _fresh_dir(sandbox.workspace)
    (directory / f"{test.name}.py").write_text(test.source, encoding="utf-8")
    workdir = PurePosixPath(sandbox.workdir.rstrip("/") or "/")
    mark = "ooda-repro-" + secrets.token_hex(16)
    mark_name = f".mark-{secrets.token_hex(8)}"
    config: dict[str, object] = {"mark": mark}
    if changed:
        probe_name = f".probe-{secrets.token_hex(8)}.py"
        (directory / probe_name).write_text(harness_source(), encoding="utf-8")
        config["probe"] = str(workdir / REPRO_DIR / probe_name)
        config["changed_lines"] = [
            [str(workdir / path), first, last]
            for path, spans in changed.items() for first, last in (spans or [(1, 10**9)])
        ]
    (directory / mark_name).write_text(json.dumps(config), encoding="utf-8")
    argv = ["python3", "-s", "-B", "-c", WRAPPER, str(workdir / REPRO_DIR / f"{test.name}.py"),
            str(workdir / REPRO_DIR / mark_name)]
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
            changed = {path: check.changed_lines.get(path, []) for path in check.changed_files}
            runs.append(run_script(sandbox, test, min(SCRIPT_TIMEOUT_S, left), check.pre_test,
                                   changed))
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
