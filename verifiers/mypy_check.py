"""Mypy stage: `python3 -m mypy -O json` on the changed Python files, inside the sandbox.

The repository's own mypy configuration applies (it comes from the base: a candidate may not
edit tool configuration); imports are followed silently so only the changed files are judged.
Only errors the unpatched code did not already have are charged (see verifiers.Baseline).
"""

from __future__ import annotations

import json
import time

from agent.protocols import CheckSpec, Sandbox, VerifierResult
from verifiers import (
    Baseline,
    Diagnostic,
    baseline_from,
    new_diagnostics,
    python_files,
    relative_to_workdir,
    render_diagnostics,
    tail,
)
from verifiers.ruff_check import ToolFailure

MYPY_ARGV = (
    "python3",
    "-m",
    "mypy",
    "-O",
    "json",
    "--cache-dir",
    "/tmp/.mypy_cache",
    "--ignore-missing-imports",
    "--follow-imports=silent",
    "--no-error-summary",
    "--no-pretty",
    "--",
)


def run_mypy(sandbox: Sandbox, files: list[str], timeout_s: float) -> tuple[list[Diagnostic], str]:
    """Mypy's errors (notes dropped) for `files` and its raw output; ToolFailure if it broke."""
    result = sandbox.run([*MYPY_ARGV, *files], timeout_s=timeout_s)
    if result.timed_out:
        raise ToolFailure(f"mypy did not finish within {timeout_s:.0f}s", timed_out=True)
    diags: list[Diagnostic] = []
    parsed = 0
    for line in result.output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(item, dict):
            continue
        parsed += 1
        if item.get("severity", "error") != "error":
            continue
        diags.append(
            Diagnostic(
                file=relative_to_workdir(str(item.get("file", "")), sandbox.workdir, files),
                line=int(item.get("line") or 0),
                column=int(item.get("column") or 0),
                code=str(item.get("code") or "mypy"),
                message=str(item.get("message", "")),
            )
        )
    if result.exit_code == 0 or (parsed and result.exit_code == 1):
        return diags, result.output
    # exit code 2: a blocking error (bad configuration, a plugin that does not load, a module
    # found twice, a crash); the syntax stage has already caught syntax errors
    shown = "\n".join(d.render() for d in diags) or result.output
    raise ToolFailure(f"mypy failed (exit code {result.exit_code}):\n{tail(shown)}")


class MypyVerifier:
    """Fails when mypy finds a type error in the changed files that the base code did not have."""

    name = "mypy"

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        """Mypy's errors on the unpatched workspace for check.changed_files."""
        files = python_files(sandbox.workspace, check.changed_files)
        if not files:
            return baseline_from(check.changed_files, [])
        try:
            diags, _ = run_mypy(sandbox, files, check.timeout_s)
        except ToolFailure as exc:
            return baseline_from(files, [], failure=str(exc))
        wanted = set(files)
        return baseline_from(check.changed_files, [d for d in diags if d.file in wanted])

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        start = time.monotonic()
        files = python_files(sandbox.workspace, check.changed_files)
        if not files:
            return VerifierResult(self.name, "passed", 0.0, "", "no Python file changed")
        base = check.baseline.get(self.name)
        base = base if isinstance(base, Baseline) else None
        try:
            found, output = run_mypy(sandbox, files, check.timeout_s)
        except ToolFailure as exc:
            return self._tool_failed(exc, base, files, time.monotonic() - start)
        wanted = set(files)
        found = [d for d in found if d.file in wanted]
        fresh = new_diagnostics(found, base)
        details: dict[str, object] = {
            "files": files,
            "new": [d.render() for d in fresh],
            "baseline_counted": base is not None,
        }
        duration = time.monotonic() - start
        if not fresh:
            return VerifierResult(self.name, "passed", duration, "", output, details)
        summary = render_diagnostics("mypy", fresh, len(found))
        return VerifierResult(self.name, "failed", duration, summary, output, details)

    def _tool_failed(
        self, exc: ToolFailure, base: Baseline | None, files: list[str], duration: float
    ) -> VerifierResult:
        message = str(exc)
        if exc.timed_out:
            return VerifierResult(self.name, "timeout", duration, message, message)
        if base is None:
            return VerifierResult(self.name, "error", duration, message, message)
        if any(path in base.failed for path in files):
            note = "mypy cannot check these files on the unpatched code either; stage skipped"
            return VerifierResult(self.name, "skipped", duration, "", f"{note}\n{message}")
        summary = f"mypy cannot check the changed files (it can check the base):\n{message}"
        return VerifierResult(self.name, "failed", duration, tail(summary), message)
