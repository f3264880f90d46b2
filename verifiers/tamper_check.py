"""Tampering stage: the second line, outside the test process. Before any candidate code runs,
the changed Python files are parsed on the host (nothing executes) and a patch that adds a
tampering primitive fails: frame walking, searching the garbage collector, forging code
objects, registering with pytest's plugin manager, rewriting `sys.modules` or `builtins`,
monkeypatching pytest, pluggy or unittest, audit hooks, hiding code from mypy
(verifiers/tamper_rules.py lists them). A fix has no business with any of them, and an
in-process cheat needs at least one; the guard (verifiers/pytest_check/guard/) catches at run
time what gets past this (a primitive reached through `exec` of a string, say).

Only what the candidate added counts: each file's findings are compared with the unpatched
file's (verifiers.Baseline: per file, the message without line numbers), so a repository that
walks frames in its own code (sympy's `var`) does not fail every candidate that edits the file.
The reason goes back to the model like any other verdict.
"""

from __future__ import annotations

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.agent.support import fstree
from ooda.verifiers import (
    Baseline,
    Diagnostic,
    baseline_from,
    new_diagnostics,
    tool_baseline,
    tool_verdict,
)
from ooda.verifiers.settings import StageSettings
from ooda.verifiers.tamper_rules import primitives

MAX_FILE_BYTES = 10 * 1024 * 1024


def run_tamper(sandbox: Sandbox, files: list[str], timeout_s: float) -> tuple[list[Diagnostic], str]:
    """The primitives in `files` as diagnostics (code `TAMPER-<kind>`), and a log of them."""
    found: list[Diagnostic] = []
    for path in files:
        try:  # never through a link, never from a FIFO or device
            data = fstree.read_regular(sandbox.workspace, path)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        for use in primitives(data, path):
            code = f"TAMPER-{use.kind}"
            found.append(Diagnostic(path, use.line, use.column, code, use.message))
    log = "\n".join(d.render() for d in found) or f"no tampering primitive in {len(files)} file(s)"
    return found, log


class TamperVerifier:
    """Fails when the change adds a tampering primitive the unpatched files did not have."""

    name = "tampering"

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        """The primitives of the unpatched files (check.changed_files)."""
        return tool_baseline(run_tamper, sandbox, check)

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        def note(files: list[str]) -> str:
            return (
                "a fix has no business with these: they reach into the test run (its frames, "
                "plugins, assertions or modules) or hide code from the checks; remove them and "
                "fix the code itself"
            )

        return tool_verdict(self.name, run_tamper, sandbox, check, note)


def judge_files(base: dict[str, bytes], candidate: dict[str, bytes]) -> list[Diagnostic]:
    """The primitives the candidate's versions of files add to the base versions (absent files:
    no entry), for benchmarks and tools that hold both texts (no sandbox needed)."""
    base_found = [
        Diagnostic(p, u.line, u.column, f"TAMPER-{u.kind}", u.message)
        for p, text in base.items()
        for u in primitives(text, p)
    ]
    found = [
        Diagnostic(p, u.line, u.column, f"TAMPER-{u.kind}", u.message)
        for p, text in candidate.items()
        for u in primitives(text, p)
    ]
    return new_diagnostics(found, baseline_from(list(candidate), base_found))


def stage(settings: StageSettings) -> TamperVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return TamperVerifier()
