"""Syntax stage: parse every changed Python file with the standard library's `ast` module.

Runs on the host, reading sandbox.workspace: parsing executes nothing. It is the cheapest
stage, so a candidate with a syntax error never reaches the tools that run inside the sandbox.
"""

from __future__ import annotations

import ast
import time

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.verifiers import clip, python_files
from ooda.verifiers.settings import StageSettings

MAX_FILE_BYTES = 10 * 1024 * 1024


class SyntaxVerifier:
    """Fails when a changed .py/.pyi file does not parse."""

    name = "syntax"

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        start = time.monotonic()
        files = python_files(sandbox.workspace, check.changed_files)
        errors = [err for path in files if (err := self._check(sandbox, path))]
        duration = time.monotonic() - start
        log = "\n".join(errors) if errors else f"parsed {len(files)} file(s): {', '.join(files)}"
        if not errors:
            return VerifierResult(self.name, "passed", duration, "", log, {"files": files})
        summary = clip("syntax errors in the changed files:\n" + "\n".join(errors))
        return VerifierResult(self.name, "failed", duration, summary, log, {"files": files})

    @staticmethod
    def _check(sandbox: Sandbox, path: str) -> str | None:
        full = sandbox.workspace / path
        try:
            if full.stat().st_size > MAX_FILE_BYTES:
                return f"{path}: file too large to be a Python source file"
            source = full.read_bytes()
            ast.parse(source, filename=path)
        except SyntaxError as exc:
            where = f"{path}:{exc.lineno or 0}:{exc.offset or 0}"
            text = f"{where}: {type(exc).__name__}: {exc.msg}"
            if exc.text and exc.text.strip():
                text += f"\n    {exc.text.rstrip()}"
            return text
        except (ValueError, OSError) as exc:
            return f"{path}: {type(exc).__name__}: {exc}"
        return None


def stage(settings: StageSettings) -> SyntaxVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return SyntaxVerifier()
