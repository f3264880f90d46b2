"""Verify a candidate patch for one task: the use case behind `ooda verify` and the loop.

For each candidate: take a warm sandbox from the pool (agent/sandbox/pool.py), fill its
workspace with a copy of the task's repo, apply the candidate's patch (the edit policy applies),
then the task's hidden test patch, and run the verifier cascade. Ruff and mypy are judged
against a baseline of the unpatched code (base + test patch), computed once per file in a second
long-lived workspace; each candidate's mypy starts from a copy of the base's warm cache
(agent/mypycache.py). `warm()` starts the sandboxes and the baselines ahead of the first
candidate.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from agent import mypycache
from agent.errors import InfraError
from agent.protocols import CheckSpec, ExecResult, Sandbox, Verifier, VerifierResult
from agent.sandbox.pool import SandboxPool
from agent.workspace import PatchError, apply_patch, make_workspace, remove_workspace
from tasks.loader import Task
from verifiers import Baseline, clip, python_files
from verifiers.cascade import default_verifiers, run_cascade
from verifiers.pytest_check import run_tests

VerdictStatus = Literal["passed", "failed", "invalid_edit", "timeout", "error"]
FEEDBACK_LIMIT = 4000
WARM_MAX_FILES = 40
"""warm() computes the baselines of every source file only for repos with at most this many."""
WARM_SKIP = frozenset({"tests", "test", "docs", "node_modules", "build", "dist", "__pycache__"})


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

    def __init__(
        self,
        task: Task,
        backend: SandboxOpener,
        work_root: Path,
        *,
        concurrency: int = 2,
        pool: SandboxPool | None = None,
    ) -> None:
        self.task = task
        self.backend = backend
        self.work_root = work_root
        self.verifiers: list[Verifier] = default_verifiers(task.verifiers.ruff, task.verifiers.mypy)
        self.pool = pool or SandboxPool(
            backend, work_root, requirements=task.requirements, size=concurrency
        )
        self._own_pool = pool is None
        self._lock = threading.Lock()
        self._baselines: dict[str, Baseline] = {}
        self._base_workspace: Path | None = None
        self._base_sandbox: Sandbox | None = None
        self._base_mypy_runs = 0
        self._warmer: threading.Thread | None = None
        self.on_close: list[Callable[[], None]] = []
        """Called at the end of close() (e.g. to close a backend opened for this verifier)."""

    # ------------------------------------------------------------------ warm-up

    def warm(self, sandboxes: int | None = None) -> None:
        """Start `sandboxes` (default: the pool's size) and the base's sandbox and baselines in
        the background, so that the first candidate finds them ready. Returns at once."""
        self.pool.warm(sandboxes)
        if self._warmer is None:
            self._warmer = threading.Thread(target=self._warm_base, name="ooda-warm", daemon=True)
            self._warmer.start()

    def _warm_base(self) -> None:
        """Base sandbox up; for a small repo, the ruff and mypy baselines of all its source files
        (which also warms mypy's cache for every candidate)."""
        try:
            files = self._warm_files()
            with self._lock:
                self._base()
            for verifier in self.verifiers:
                if isinstance(verifier, BaselineVerifier) and files:
                    spec = CheckSpec(changed_files=files, timeout_s=self.task.verifiers.timeout_s)
                    self._prepare(verifier, spec)
        except Exception:  # a warm-up problem shows again, properly, on the first candidate
            pass

    def _warm_files(self) -> list[str]:
        """The repo's non-test Python files, when there are few enough to check them all."""
        found: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.task.repo):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in WARM_SKIP]
            rel = os.path.relpath(dirpath, self.task.repo)
            for name in filenames:
                if name.endswith(".py") and not name.startswith("test_") and name != "conftest.py":
                    found.append(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/"))
                    if len(found) > WARM_MAX_FILES:
                        return []
        return sorted(found)

    # ------------------------------------------------------------------ candidates

    def verify(
        self, patch: str, *, log_dir: Path | None = None, deadline: float | None = None
    ) -> Verdict:
        """Judge `patch` (a unified diff against task.repo)."""
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            # as given, even when it is not valid text (the policy then rejects it)
            (log_dir / "patch.diff").write_text(patch, encoding="utf-8", errors="backslashreplace")
        try:
            sandbox, changed = self.pool.acquire(lambda workspace: self._fill(workspace, patch))
        except _HiddenTestsConflict as exc:
            return self._invalid(
                "the task's hidden tests no longer apply on top of this patch: it "
                "changes lines the tests' own patch changes; leave those files alone",
                log_dir,
                exc.changed,
            )
        except PatchError as exc:
            return self._invalid(f"{exc}", log_dir)
        try:
            check = self._check(changed)
            results = run_cascade(
                Watched(sandbox), check, self.verifiers, deadline=deadline, prepare=self._prepare
            )
        finally:
            self.pool.release(sandbox)
        if log_dir is not None:
            for result in results:
                (log_dir / f"{result.name}.log").write_text(result.log, encoding="utf-8")
        return verdict_from(results, changed)

    def _fill(self, workspace: Path, patch: str) -> list[str]:
        """Populate an empty workspace: the repo, the patch, the hidden tests, mypy's warm cache.
        Returns the paths the patch changed; raises PatchError (_HiddenTestsConflict)."""
        copy = make_workspace(self.task.repo, self.work_root)
        try:
            for entry in os.listdir(copy):
                os.rename(copy / entry, workspace / entry)
        finally:
            remove_workspace(copy)
        changed = apply_patch(workspace, patch)
        if self.task.test_patch:
            try:
                apply_patch(workspace, self.task.test_patch, trusted=True)
            except PatchError as exc:
                raise _HiddenTestsConflict(changed) from exc
        if self.task.verifiers.mypy:
            self._seed_mypy(workspace, changed)
        return changed

    def _seed_mypy(self, workspace: Path, changed: list[str]) -> None:
        """Give the candidate a private copy of the base's mypy cache, taken once the base has
        been checked for the changed files (so their imports are in it)."""
        mypycache.prepare(workspace)
        files = python_files(workspace, changed)
        mypy = next((v for v in self.verifiers if v.name == "mypy"), None)
        if not files or not isinstance(mypy, BaselineVerifier):
            return
        with self._lock:
            sandbox = self._base()
            spec = CheckSpec(changed_files=files, timeout_s=self.task.verifiers.timeout_s)
            self._grow_baseline(mypy, sandbox, spec)
            mypycache.copy_cache(mypycache.cache_dir(sandbox.workspace), workspace)

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
            known = self._grow_baseline(verifier, self._base(), check)
            check.baseline[verifier.name] = known.subset(check.changed_files)

    def _grow_baseline(
        self, verifier: BaselineVerifier, sandbox: Sandbox, check: CheckSpec
    ) -> Baseline:
        """The verifier's baseline, extended to check.changed_files; the lock is held."""
        known = self._baselines.setdefault(verifier.name, Baseline())
        files = python_files(sandbox.workspace, check.changed_files)
        missing = known.missing(files)
        if missing:
            spec = CheckSpec(changed_files=missing, timeout_s=self.task.verifiers.timeout_s)
            known.merge(verifier.baseline(sandbox, spec))
            if verifier.name == "mypy" and self._base_mypy_runs == 0:
                mypycache.save_seed(sandbox.workspace, self.backend.name, self.task.repo)
            self._base_mypy_runs += verifier.name == "mypy"
        return known

    def _base(self) -> Sandbox:
        """The long-lived sandbox on the unpatched repo (+ test patch); the lock is held."""
        if self._base_sandbox is None:
            workspace = self._base_workspace or self._fresh_base()
            self._base_workspace = workspace
            opened = self.backend.open(workspace, requirements=self.task.requirements)
            self._base_sandbox = Watched(opened)
        return self._base_sandbox

    def _fresh_base(self) -> Path:
        workspace = make_workspace(self.task.repo, self.work_root)
        try:
            if self.task.test_patch:
                apply_patch(workspace, self.task.test_patch, trusted=True)
            if self.task.verifiers.mypy:
                mypycache.prepare(workspace)
                seed = mypycache.seed_path(self.backend.name, self.task.repo)
                mypycache.copy_cache(seed, workspace)
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
        """Release the pool (when this verifier made it), the baseline sandbox and workspace
        (the backend stays open)."""
        if self._warmer is not None:
            self._warmer.join(timeout=60)
        closing = threading.Thread(target=self.pool.close, name="ooda-pool-close")
        if self._own_pool:
            closing.start()  # in parallel with the base sandbox below
        with self._lock:
            sandbox, workspace = self._base_sandbox, self._base_workspace
            self._base_sandbox = self._base_workspace = None
        try:
            if sandbox is not None:
                sandbox.close()
        finally:
            if workspace is not None:
                remove_workspace(workspace)
            if closing.is_alive():
                closing.join()
            callbacks, self.on_close = self.on_close, []
            for callback in callbacks:
                callback()


class _HiddenTestsConflict(PatchError):
    """The task's test patch does not apply on top of the candidate's patch."""

    def __init__(self, changed: list[str]) -> None:
        super().__init__("the hidden tests do not apply")
        self.changed = changed


UNUSABLE = "sandbox unusable: "
"""How the sandboxes answer a command they could not run at all (exit code 125)."""
NOT_INFRA = ("outlived", "it was closed")
"""...after a command's own timeout, or once closed: not the infrastructure's fault."""


class Watched:
    """A sandbox as the verifiers see it: when it could not run a command at all because it
    broke (its container went away: the engine restarted, the container was removed), that is
    an InfraError (the run ends, exit 3), not a result a verifier would read as the candidate's
    failure, a tool crash or a skipped stage."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.workspace = inner.workspace
        self.workdir = inner.workdir

    def run(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        result = self.inner.run(argv, timeout_s=timeout_s, env=env)
        if (
            result.exit_code == 125
            and result.output.startswith(UNUSABLE)
            and not any(text in result.output for text in NOT_INFRA)
        ):
            why = result.output[len(UNUSABLE) :].strip().splitlines()[0]
            raise InfraError(f"the {self.backend} sandbox broke while verifying: {why}")
        return result

    def close(self) -> None:
        self.inner.close()


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
