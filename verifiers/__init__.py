"""The verification cascade: one module per stage (syntax, ruff, mypy, pytest), each behind the
`Verifier` protocol of agent/contracts/protocols.py, run cheapest first by verifiers/cascade.py.

This package module holds only what several stages share: bounded text for summaries, the
changed Python files, and baseline-relative diagnostics (a candidate is charged only with the
diagnostics the unpatched code did not already have). It imports no stage module, so stages
can import it without cycles.
"""

from __future__ import annotations

import os
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult, VerifierStatus

PYTHON_SUFFIXES = (".py", ".pyi")
SUMMARY_LIMIT = 2000
"""Most characters a summary fed back to the model may hold."""

_LINE_REF = re.compile(r"\bline \d+\b")


def clip(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """`text` cut to at most `limit` characters (the head kept, the cut marked)."""
    if len(text) <= limit:
        return text
    marker = " [...]"
    return text[: max(limit - len(marker), 0)] + marker


def tail(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """The last `limit` characters of `text` (the cut marked)."""
    if len(text) <= limit:
        return text
    marker = "[...] "
    return marker + text[len(text) - max(limit - len(marker), 0) :]


def python_files(workspace: Path, changed: Sequence[str]) -> list[str]:
    """The changed .py/.pyi files that exist as regular files inside `workspace`, deduplicated."""
    return changed_files(workspace, [p for p in changed if p.endswith(PYTHON_SUFFIXES)])


def changed_files(workspace: Path, changed: Sequence[str]) -> list[str]:
    """The changed files that exist as regular files inside `workspace`, deduplicated."""
    root = os.path.realpath(workspace)
    found: list[str] = []
    for path in dict.fromkeys(changed):
        full = os.path.join(root, path)
        real = os.path.realpath(full)
        if os.path.commonpath([root, real]) != root or os.path.islink(full):
            continue
        if os.path.isfile(real):
            found.append(path)
    return found


def relative_to_workdir(filename: str, workdir: str, files: Sequence[str] = ()) -> str:
    """A tool's file name as a repo-relative POSIX path (tools print absolute ones sometimes,
    possibly through a resolved symlink: then the longest of `files` it ends with is used)."""
    path = PurePosixPath(filename)
    if path.is_absolute():
        for root in dict.fromkeys([workdir, os.path.realpath(workdir)]):
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                pass
        suffixes = [f for f in files if filename.endswith("/" + f)]
        return max(suffixes, key=len) if suffixes else filename
    text = path.as_posix()
    return text[2:] if text.startswith("./") else text


@dataclass(frozen=True)
class Diagnostic:
    """One ruff or mypy finding."""

    file: str
    line: int
    column: int
    code: str
    message: str

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity across versions of the file: line numbers ignored, also inside messages."""
        return (self.file, self.code, _LINE_REF.sub("line N", self.message))

    def render(self) -> str:
        return f"{self.file}:{self.line}:{self.column}: {self.code} {self.message}"


@dataclass
class Baseline:
    """Diagnostics of the unpatched code, per file, for one tool.

    Files are added as they are first needed (a candidate's changed files), so one baseline
    can be grown lazily and shared by all candidates of a task."""

    files: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    """file -> the keys of its diagnostics on the base (a file absent from the base: [])."""
    failed: dict[str, str] = field(default_factory=dict)
    """file -> why the tool could not check it on the base (crash, timeout)."""

    def missing(self, paths: Iterable[str]) -> list[str]:
        """The paths this baseline knows nothing about yet."""
        return [p for p in paths if p not in self.files and p not in self.failed]

    def merge(self, other: Baseline) -> None:
        self.files.update(other.files)
        self.failed.update(other.failed)

    def subset(self, paths: Iterable[str]) -> Baseline:
        wanted = set(paths)
        return Baseline(
            files={p: v for p, v in self.files.items() if p in wanted},
            failed={p: v for p, v in self.failed.items() if p in wanted},
        )


def baseline_from(
    files: Sequence[str], diagnostics: Iterable[Diagnostic], *, failure: str | None = None
) -> Baseline:
    """A Baseline covering `files`: their diagnostics, or `failure` for each when the run failed."""
    if failure is not None:
        return Baseline(failed={p: failure for p in files})
    found: dict[str, list[tuple[str, str, str]]] = {p: [] for p in files}
    for diag in diagnostics:
        found.setdefault(diag.file, []).append(diag.key)
    return Baseline(files=found)


def new_diagnostics(found: Sequence[Diagnostic], base: Baseline | None) -> list[Diagnostic]:
    """The diagnostics in `found` that the base did not already have (compared as multisets of
    (file, code, message); line numbers ignored). Files the base could not be checked for are
    not charged to the candidate."""
    if base is None:
        return list(found)
    remaining: Counter[tuple[str, str, str]] = Counter()
    for keys in base.files.values():
        remaining.update(keys)
    fresh: list[Diagnostic] = []
    for diag in found:
        if diag.file in base.failed:
            continue
        if remaining[diag.key] > 0:
            remaining[diag.key] -= 1
        else:
            fresh.append(diag)
    return fresh


def render_diagnostics(tool: str, fresh: Sequence[Diagnostic], total: int) -> str:
    """The bounded summary of new diagnostics fed back to the model."""
    head = f"{tool}: {len(fresh)} new error(s) in the changed files"
    if total > len(fresh):
        head += f" ({total - len(fresh)} already present before the change not counted)"
    lines = [head + ":"] + [d.render() for d in fresh[:30]]
    if len(fresh) > 30:
        lines.append(f"... and {len(fresh) - 30} more")
    return clip("\n".join(lines))


class ToolFailure(Exception):
    """The tool itself failed (crash, bad output, timeout) instead of judging the code."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


ToolRun = Callable[[Sandbox, list[str], float], tuple[list[Diagnostic], str]]
"""A linter run: (sandbox, files, timeout) -> (its diagnostics, its raw output)."""


FileFilter = Callable[[Path, Sequence[str]], list[str]]
"""Which of the changed files a tool judges (default: the Python ones, `python_files`)."""


def tool_baseline(run: ToolRun, sandbox: Sandbox, check: CheckSpec,
                  judged: FileFilter = python_files) -> Baseline:
    """A linter's diagnostics on the unpatched workspace for check.changed_files."""
    files = judged(sandbox.workspace, check.changed_files)
    if not files:
        return baseline_from(check.changed_files, [])
    try:
        diags, _ = run(sandbox, files, check.timeout_s)
    except ToolFailure as exc:
        return baseline_from(files, [], failure=str(exc))
    wanted = set(files)
    return baseline_from(check.changed_files, [d for d in diags if d.file in wanted])


def tool_verdict(
    name: str,
    run: ToolRun,
    sandbox: Sandbox,
    check: CheckSpec,
    note: Callable[[list[str]], str],
    judged: FileFilter = python_files,
) -> VerifierResult:
    """A linter stage from start to verdict: `run` on the changed Python files, its failure a
    "timeout" or "error" result, its findings judged against the baseline (diagnostics_verdict);
    `note(files)` is asked only on failure."""
    start = time.monotonic()
    files = judged(sandbox.workspace, check.changed_files)
    if not files:
        return VerifierResult(name, "passed", 0.0, "", "no Python file changed"
                              if judged is python_files else "no file changed")
    base = check.baseline.get(name)
    base = base if isinstance(base, Baseline) else None
    try:
        found, output = run(sandbox, files, check.timeout_s)
    except ToolFailure as exc:
        status: VerifierStatus = "timeout" if exc.timed_out else "error"
        return VerifierResult(name, status, time.monotonic() - start, str(exc), str(exc))
    return diagnostics_verdict(name, found, output, base, files, start, lambda: note(files))


def diagnostics_verdict(
    name: str,
    found: list[Diagnostic],
    output: str,
    base: Baseline | None,
    files: list[str],
    start: float,
    note: Callable[[], str],
) -> VerifierResult:
    """A linter stage's result: failed when `found` has diagnostics `base` did not have.

    `note()` is asked only on failure, for a line appended to the summary ("" for none)."""
    fresh = new_diagnostics(found, base)
    details: dict[str, object] = {
        "files": files,
        "new": [d.render() for d in fresh],
        "baseline_counted": base is not None,
    }
    duration = time.monotonic() - start
    if not fresh:
        return VerifierResult(name, "passed", duration, "", output, details)
    summary = render_diagnostics(name, fresh, len(found))
    extra = note()
    if extra:
        summary += f"\n{extra}"
    return VerifierResult(name, "failed", duration, summary, output, details)
