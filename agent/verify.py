"""Verify a candidate patch for one task: the use case behind `ooda verify` and the loop.

For each candidate: copy the task's repo into a fresh workspace, apply the candidate's patch
(the edit policy applies), then the task's hidden test patch, open a sandbox on the result and
run the verifier cascade. Ruff and mypy are judged against a baseline of the unpatched code
(base + test patch), computed lazily, once per file, in a second long-lived workspace.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from agent.protocols import CheckSpec, Sandbox, Verifier, VerifierResult
from agent.workspace import PatchError, apply_patch, make_workspace, remove_workspace
from tasks.loader import Task
from verifiers import Baseline, clip, python_files
from verifiers.cascade import default_verifiers, run_cascade
from verifiers.pytest_check import run_tests

VerdictStatus = Literal["passed", "failed", "invalid_edit", "timeout", "error"]
FEEDBACK_LIMIT = 4000


class SandboxOpener(Protocol):
    """What this module needs of agent.sandbox.SandboxBackend."""

    name: str

    def open(self, workspace: Path, *, requirements: Path | None = None) -> Sandbox: ...


@runtime_checkable
class BaselineVerifier(Protocol):
    """A verifier judged relative to the unpatched code (ruff, mypy)."""

    name: str

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline: ...


@dataclass
class Verdict:
    """The outcome of verifying one patch."""

    status: VerdictStatus
    reason: str
    """One line."""
    results: list[VerifierResult] = field(default_factory=list)
    feedback: str = ""
    """Bounded text for the model: the patch problem or the failing verifier's summary."""
    changed_files: list[str] = field(default_factory=list)


class TaskVerifier:
    """Verifies candidate patches for one task; computes the ruff/mypy baselines once (lazily)
    and reuses them. verify() may be called from several threads at once."""

    def __init__(self, task: Task, backend: SandboxOpener, work_root: Path) -> None:
        self.task = task
        self.backend = backend
        self.work_root = work_root
        self.verifiers: list[Verifier] = default_verifiers(task.verifiers.ruff, task.verifiers.mypy)
        self._lock = threading.Lock()
        self._baselines: dict[str, Baseline] = {}
        self._base_workspace: Path | None = None
        self._base_sandbox: Sandbox | None = None

    # ------------------------------------------------------------------ candidates

    def verify(
        self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None
    ) -> Verdict:
        """Judge `patch` (a unified diff against task.repo)."""
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            (log_dir / "patch.diff").write_text(patch, encoding="utf-8")
        workspace = make_workspace(self.task.repo, self.work_root)
        sandbox: Sandbox | None = None
        try:
            try:
                changed = apply_patch(workspace, patch)
            except PatchError as exc:
                return self._invalid(f"{exc}", log_dir)
            if self.task.test_patch:
                try:
                    apply_patch(workspace, self.task.test_patch, trusted=True)
                except PatchError:
                    return self._invalid(
                        "the task's hidden tests no longer apply on top of this patch: it "
                        "changes lines the tests' own patch changes; leave those files alone",
                        log_dir,
                        changed,
                    )
            check = self._check(changed)
            sandbox = self.backend.open(workspace, requirements=self.task.requirements)
            results = run_cascade(
                sandbox, check, self.verifiers, deadline=deadline, prepare=self._prepare
            )
        finally:
            try:
                if sandbox is not None:
                    sandbox.close()
            finally:
                remove_workspace(workspace)
        if log_dir is not None:
            for result in results:
                (log_dir / f"{result.name}.log").write_text(result.log, encoding="utf-8")
        return verdict_from(results, changed)

    def _check(self, changed: list[str]) -> CheckSpec:
        return CheckSpec(
            changed_files=changed,
            fail_to_pass=list(self.task.fail_to_pass),
            pass_to_pass=list(self.task.pass_to_pass),
            test_cmd=self.task.test_cmd,
            timeout_s=self.task.verifiers.timeout_s,
        )

    @staticmethod
    def _invalid(reason: str, log_dir: Path | None, changed: list[str] | None = None) -> Verdict:
        if log_dir is not None:
            (log_dir / "apply.log").write_text(reason + "\n", encoding="utf-8")
        first = reason.strip().splitlines()[0] if reason.strip() else "the patch was rejected"
        return Verdict(
            status="invalid_edit",
            reason=f"invalid edit: {first}",
            results=[],
            feedback=clip(reason, FEEDBACK_LIMIT),
            changed_files=changed or [],
        )

    # ------------------------------------------------------------------ baselines

    def _prepare(self, verifier: Verifier, check: CheckSpec) -> None:
        """Before a baseline-relative stage: put its baseline for the changed files in check."""
        if not isinstance(verifier, BaselineVerifier):
            return
        with self._lock:
            known = self._baselines.setdefault(verifier.name, Baseline())
            sandbox = self._base()
            files = python_files(sandbox.workspace, check.changed_files)
            missing = known.missing(files)
            if missing:
                spec = CheckSpec(changed_files=missing, timeout_s=self.task.verifiers.timeout_s)
                known.merge(verifier.baseline(sandbox, spec))
            check.baseline[verifier.name] = known.subset(check.changed_files)

    def _base(self) -> Sandbox:
        """The long-lived sandbox on the unpatched repo (+ test patch); the lock is held."""
        if self._base_sandbox is None:
            workspace = self._base_workspace or self._fresh_base()
            self._base_workspace = workspace
            self._base_sandbox = self.backend.open(workspace, requirements=self.task.requirements)
        return self._base_sandbox

    def _fresh_base(self) -> Path:
        workspace = make_workspace(self.task.repo, self.work_root)
        try:
            if self.task.test_patch:
                apply_patch(workspace, self.task.test_patch, trusted=True)
        except BaseException:
            remove_workspace(workspace)
            raise
        return workspace

    # ------------------------------------------------------------------ base tests

    def run_base_tests(
        self, ids_or_cmd: list[str] | str | None = None, *, timeout_s: float | None = None
    ) -> dict[str, str]:
        """Per-test outcomes on the unpatched repo (+ test patch), for deriving fail_to_pass
        and pass_to_pass. Default: the task's own ids, else its test command.

        Raises verifiers.pytest_check.TestRunError (timeout, no report) and ValueError (a test
        command that is not a pytest run)."""
        target: list[str] | str
        if ids_or_cmd is not None:
            target = ids_or_cmd
        elif self.task.fail_to_pass or self.task.pass_to_pass:
            target = list(self.task.fail_to_pass) + list(self.task.pass_to_pass)
        elif self.task.test_cmd:
            target = self.task.test_cmd
        else:
            target = "pytest"
        workspace = self._fresh_base()
        sandbox: Sandbox | None = None
        try:
            sandbox = self.backend.open(workspace, requirements=self.task.requirements)
            return run_tests(sandbox, target, timeout_s or self.task.verifiers.timeout_s)
        finally:
            try:
                if sandbox is not None:
                    sandbox.close()
            finally:
                remove_workspace(workspace)

    def close(self) -> None:
        """Release the baseline sandbox and workspace (the backend stays open)."""
        with self._lock:
            sandbox, workspace = self._base_sandbox, self._base_workspace
            self._base_sandbox = self._base_workspace = None
        try:
            if sandbox is not None:
                sandbox.close()
        finally:
            if workspace is not None:
                remove_workspace(workspace)


def verdict_from(results: list[VerifierResult], changed: list[str]) -> Verdict:
    """The verdict of a finished cascade: the first stage that did not pass decides."""
    for result in results:
        if result.status in ("passed", "skipped"):
            continue
        status: VerdictStatus = (
            "timeout"
            if result.status == "timeout"
            else "error"
            if result.status == "error"
            else "failed"
        )
        first = result.summary.strip().splitlines()[0] if result.summary.strip() else ""
        reason = clip(f"{result.name} {result.status}" + (f": {first}" if first else ""), 300)
        return Verdict(status, reason, results, clip(result.summary, FEEDBACK_LIMIT), changed)
    names = ", ".join(r.name for r in results)
    return Verdict("passed", f"passed: {names}", results, "", changed)
