"""Mypy stage: `python3 -m mypy -O json` on the changed Python files, inside the sandbox.

The repository's own mypy configuration applies (it comes from the base: a candidate may not
edit tool configuration); imports are followed silently so only the changed files are judged.
Only errors the unpatched code did not already have are charged (see verifiers.Baseline).

Mypy runs as `python3 -P -m mypy`: the workspace is its working directory but not on its
import path, so a module the candidate adds (named like one mypy imports: `librt`,
`typing_extensions`, `mypy` itself) is checked, never run inside mypy.

Suppressions are not honoured: mypy reads each checked file through `--shadow-file` from a copy
without its `# type: ignore` and `# mypy: ...` comments (found with `tokenize`, so strings are
never touched and line numbers stay) and without its `@typing.no_type_check` decorators (found
with `ast`, under any name they are imported as; their lines left blank), on the base and on
the candidate alike. An
error the candidate adds and hides behind a new `# type: ignore` still counts; the base's own
suppressed errors are in the baseline and are not charged.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import time
import tokenize
from pathlib import Path

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.agent.support import fstree
from ooda.verifiers import (
    Baseline,
    Diagnostic,
    ToolFailure,
    diagnostics_verdict,
    python_files,
    relative_to_workdir,
    tail,
    tool_baseline,
)
from ooda.verifiers.settings import StageSettings

CACHE_DIR = ".ooda/mypy-cache"
"""Mypy's incremental cache, relative to the workspace (.ooda/: no patch may touch it), so the
host can give each candidate a copy of the base's warm cache (agent/verify/mypycache.py)."""
MYPY_ARGV = (
    "python3",
    "-P",  # the workspace (cwd) is not put on sys.path: it cannot shadow mypy's own imports
    "-m",
    "mypy",
    "-O",
    "json",
    "--cache-dir",
    CACHE_DIR,
    "--ignore-missing-imports",
    "--follow-imports=silent",
    "--no-error-summary",
    "--no-pretty",
    "--",
)


SHADOW_DIR = ".ooda/mypy"
"""Where the copies without suppression comments go (.ooda/: no patch may touch it)."""
_SUPPRESSION = re.compile(r"#\s*(?:type:\s*ignore\b|mypy:)")


def strip_suppressions(source: bytes) -> bytes | None:
    """`source` without its `# type: ignore[...]` and `# mypy: ...` comments and without its
    `@typing.no_type_check` decorators (the lines kept, so line numbers do not move), or None
    when it has none or cannot be tokenized."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
        text = source.decode(encoding)
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (SyntaxError, UnicodeDecodeError, tokenize.TokenError, LookupError):
        return None
    lines = text.splitlines(keepends=True)
    cut = False
    for token in reversed(tokens):  # right to left: earlier columns stay valid
        if token.type == tokenize.COMMENT and _SUPPRESSION.match(token.string):
            row, col = token.start
            line = lines[row - 1]
            end = col + len(token.string)
            lines[row - 1] = line[:col].rstrip(" \t") + line[end:]
            cut = True
    for first, last in _no_type_check_decorators(text):
        for row in range(first, last + 1):  # a blank line may stand between decorators
            ending = "\r\n" if lines[row - 1].endswith("\r\n") else "\n"
            lines[row - 1] = ending
        cut = True
    return "".join(lines).encode(encoding) if cut else None


def _no_type_check_decorators(text: str) -> list[tuple[int, int]]:
    """(first line, last line) of each decorator that is `typing.no_type_check` (also
    imported under another name, or from typing_extensions): mypy would not check what it
    decorates."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    names = {"typing.no_type_check", "typing_extensions.no_type_check"}
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("typing", "typing_extensions"):
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name] = alias.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for decorator in node.decorator_list:
                if _dotted(decorator, aliases) in names:
                    found.append((decorator.lineno, decorator.end_lineno or decorator.lineno))
    return found


def _dotted(node: ast.expr, aliases: dict[str, str]) -> str | None:
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else None
    return None


def _shadow_args(sandbox: Sandbox, files: list[str]) -> list[str]:
    """`--shadow-file FILE COPY` for each file that carries suppression comments."""
    args: list[str] = []
    for path in files:
        try:
            stripped = strip_suppressions(fstree.read_regular(sandbox.workspace, path))
        except OSError:  # gone, a link, not a regular file: never followed or read on the host
            continue
        if stripped is None:
            continue
        copy = sandbox.workspace / SHADOW_DIR / path
        copy.parent.mkdir(parents=True, exist_ok=True)
        copy.write_bytes(stripped)
        args += ["--shadow-file", path, f"{SHADOW_DIR}/{path}"]
    return args


def _cache_dir(workspace: Path) -> None:
    """Make sure the cache directory exists and the sandbox user (who owns the workspace root)
    can write it; mypy crashes on a cache directory it cannot create."""
    owner = workspace.stat()
    path = workspace
    for part in Path(CACHE_DIR).parts:
        path = path / part
        if path.is_symlink():
            return  # not ours to follow; mypy will report what it finds
        if not path.exists():
            path.mkdir(mode=0o755)
        if os.geteuid() == 0 and path.stat().st_uid != owner.st_uid:
            os.chown(path, owner.st_uid, owner.st_gid)


def run_mypy(sandbox: Sandbox, files: list[str], timeout_s: float) -> tuple[list[Diagnostic], str]:
    """Mypy's errors (notes dropped) for `files` and its raw output; ToolFailure if it broke.
    Suppression comments in `files` are disregarded (see the module docstring)."""
    _cache_dir(sandbox.workspace)
    shadows = _shadow_args(sandbox, files)
    argv = [*MYPY_ARGV[:-1], *shadows, "--", *files]
    result = sandbox.run(argv, timeout_s=timeout_s)
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
    """Runs only for a candidate whose tests passed, in a reset sandbox on a fresh copy: no
    candidate code may have run where mypy looks (agent/verify/verifier.py)."""

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        """Mypy's errors on the unpatched workspace for check.changed_files."""
        return tool_baseline(run_mypy, sandbox, check)

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

        def note() -> str:
            if (sandbox.workspace / SHADOW_DIR).exists():
                return (
                    "note: `# type: ignore` and `# mypy:` comments and `@no_type_check` are "
                    "not honoured here; fix the types instead"
                )
            return ""

        return diagnostics_verdict(self.name, found, output, base, files, start, note)

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


def stage(settings: StageSettings) -> MypyVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return MypyVerifier()
