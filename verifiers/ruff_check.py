"""Ruff stage: `python3 -m ruff check` on the changed Python files, inside the sandbox.

`--isolated` ignores whatever configuration the repository carries and `--select` pins the
rule set to ruff's classic defaults (pyflakes and the error-level pycodestyle rules: real
mistakes, not style), so the verdict does not move with ruff versions (whose default sets
grow). `--ignore-noqa` disregards `# noqa` comments, file-level ones included, on the base and
on the candidate alike: an error the candidate adds and hides behind a new `# noqa` still counts,
while the base's own suppressed findings stay in the baseline. `--output-format json` gives a
structured report. `python3 -P` keeps the workspace off the import path, so a module the
candidate adds (`ruff`, or one the launcher imports) cannot stand in for ruff. Only diagnostics the unpatched code did not already have are charged to the
candidate (see verifiers.Baseline).
"""

from __future__ import annotations

import json

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.agent.support import fstree
from ooda.verifiers import (
    Baseline,
    Diagnostic,
    ToolFailure,
    relative_to_workdir,
    tail,
    tool_baseline,
    tool_verdict,
)
from ooda.verifiers.settings import StageSettings

RULES = "E4,E7,E9,F"
"""Ruff's long-standing default selection: import, statement and syntax errors, pyflakes."""
RUFF_ARGV = (
    "python3",
    "-P",  # the workspace (cwd) is not put on sys.path: it cannot shadow ruff's launcher
    "-m",
    "ruff",
    "check",
    "--isolated",
    "--output-format",
    "json",
    "--no-cache",
    "--ignore-noqa",
    "--select",
    RULES,
    "--target-version",
    "py311",
    "--",
)


def run_ruff(
    sandbox: Sandbox, files: list[str], timeout_s: float, rules: str = RULES
) -> tuple[list[Diagnostic], str]:
    """Ruff's diagnostics for `files` (for `rules`, by default RULES) and its raw output;
    ToolFailure when ruff broke."""
    argv = [rules if arg == RULES else arg for arg in RUFF_ARGV]
    result = sandbox.run([*argv, *files], timeout_s=timeout_s)
    if result.timed_out:
        raise ToolFailure(f"ruff did not finish within {timeout_s:.0f}s", timed_out=True)
    if result.exit_code not in (0, 1):
        raise ToolFailure(f"ruff failed (exit code {result.exit_code}):\n{tail(result.output)}")
    start = result.output.find("[")
    try:
        items = json.loads(result.output[start:]) if start >= 0 else None
    except json.JSONDecodeError:
        items = None
    if not isinstance(items, list):
        raise ToolFailure(f"ruff printed no JSON report:\n{tail(result.output)}")
    diags = []
    for item in items:
        location = item.get("location") or {}
        diags.append(
            Diagnostic(
                file=relative_to_workdir(str(item.get("filename", "")), sandbox.workdir, files),
                line=int(location.get("row") or 0),
                column=int(location.get("column") or 0),
                code=str(item.get("code") or item.get("name") or "ruff"),
                message=str(item.get("message", "")),
            )
        )
    return diags, result.output


class RuffVerifier:
    """Fails when ruff finds an error in the changed files that the base code did not have."""

    name = "ruff"

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        """Ruff's findings on the unpatched workspace for check.changed_files."""
        return tool_baseline(run_ruff, sandbox, check)

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        def note(files: list[str]) -> str:
            if any("noqa" in _text(sandbox, path) for path in files):
                return "note: `# noqa` comments are not honoured here; fix the code instead"
            return ""

        return tool_verdict(self.name, run_ruff, sandbox, check, note)


def _text(sandbox: Sandbox, path: str) -> str:
    try:  # never through a link, never from a FIFO or device (agent.fstree)
        return fstree.read_regular(sandbox.workspace, path).decode("utf-8", "replace")
    except OSError:
        return ""


def stage(settings: StageSettings) -> RuffVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return RuffVerifier()
