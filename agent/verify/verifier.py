"""Verify a candidate patch for one task: the use case behind `ooda verify` and the loop.

For each candidate: take a warm sandbox from the pool (agent/sandbox/pool.py), fill its
workspace with a copy of the task's repo, apply the candidate's patch (the edit policy applies),
then the task's hidden test patch, and run the verifier cascade: syntax, ruff, pytest, then (only
when the tests pass, in the reset sandbox on a fresh copy, as no candidate code may have run
where mypy looks) mypy. Ruff and mypy are judged
against a baseline of the unpatched code (base + test patch), computed once per file in a second
long-lived workspace; each candidate's mypy starts from a copy of the base's warm cache
(agent/verify/mypycache.py). That cache (and the machine's seed) is only ever taken from a sandbox that
held nothing but the unpatched repo, never from one where a candidate's patch or code was, and
only as directories and regular files (agent/support/fstree.py). `warm()` starts the sandboxes and the
baselines ahead of the first candidate.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol, cast, runtime_checkable

from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import (
    CheckSpec,
    ExecResult,
    Sandbox,
    SandboxBackend,
    Verdict,
    VerdictStatus,
    Verifier,
    VerifierResult,
)
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.support import fstree
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.verify import mypycache
from ooda.agent.verify.workspace import PatchError, apply_patch, make_workspace
from ooda.tasks.loader import Task
from ooda.verifiers import Baseline, clip, python_files
from ooda.verifiers.cascade import default_verifiers, run_cascade
from ooda.verifiers.pytest_check.run import REPORT_DIR, run_tests

FEEDBACK_LIMIT = 4000
WARM_MAX_FILES = 40
"""warm() computes the baselines of every source file only for repos with at most this many."""
WARM_SKIP = frozenset({"tests", "test", "docs", "node_modules", "build", "dist", "__pycache__"})


@runtime_checkable
class BaselineVerifier(Protocol):
    """A verifier judged relative to the unpatched code (ruff, mypy)."""

    name: str

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline: ...


class TaskVerifier:
    """Verifies candidate patches for one task; computes the ruff/mypy baselines once (lazily)
    and reuses them. verify() may be called from several threads at once."""

    def __init__(
        self,
        task: Task,
        backend: SandboxBackend,
        work_root: Path,
        *,
        concurrency: int = 2,
        pool: SandboxPool | None = None,
    ) -> None:
        self.task = task
        self.backend = backend
        self.work_root = work_root
        work_root.mkdir(parents=True, exist_ok=True)
        self.verifiers: list[Verifier] = [
            _Optimistic(stage, self) if isinstance(stage, BaselineVerifier) else stage
            for stage in default_verifiers(task.verifiers.ruff, task.verifiers.mypy)
        ]
        self.pool = pool or SandboxPool(
            backend, work_root, requirements=task.requirements, size=concurrency
        )
        self._own_pool = pool is None
        self._lock = threading.Lock()
        """Guards _baselines and _base_cache (held briefly, never while waiting for a sandbox)."""
        self._base_lock = threading.Lock()
        """Serialises baseline computations in the pool (so each file is checked once)."""
        self._baselines: dict[str, Baseline] = {}
        self._base_cache: Path | None = None
        """The base's mypy cache on the host: what each candidate's mypy starts from."""
        self._base_caches: list[Path] = []
        self._base_mypy_runs = 0
        self._warmer: threading.Thread | None = None
        self._cache_grower: threading.Thread | None = None
        """Grows the base's mypy cache in a base-only sandbox after a candidate needed the
        baseline of files it lacked (that candidate's own cache is never kept)."""
        self._cached: set[str] = set()
        """Files the kept base cache has been checked for."""
        self.on_close: list[Callable[[], None]] = []
        """Called at the end of close() (e.g. to close a backend opened for this verifier)."""

    # ------------------------------------------------------------------ warm-up

    def warm(self, sandboxes: int | None = None) -> None:
        """Start `sandboxes` (default: the pool's size) in the background and, when there are
        two or more (one can be spared), the base's baselines and mypy cache, so that the
        first candidates find them ready. Returns at once."""
        count = self.pool.size if sandboxes is None else sandboxes
        self.pool.warm(count)
        if self._warmer is None and count >= 2:
            self._warmer = threading.Thread(target=self._warm_base, name="ooda-warm", daemon=True)
            self._warmer.start()

    def _warm_base(self) -> None:
        """For a small repo, the ruff and mypy baselines of all its source files (which also
        warms mypy's cache for every candidate)."""
        try:
            files = self._warm_files()
            if files:
                self._ensure_baselines(files)
        except Exception:  # a warm-up problem shows again, properly, on the first candidate
            pass

    def _warm_files(self) -> list[str]:
        """The repo's non-test Python files, when there are few enough to check them all."""
        found: list[str] = []
        for dirpath, dirnames, filenames in fstree.walk(self.task.repo):
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
        self,
        patch: str,
        *,
        log_dir: Path | None = None,
        deadline: float | None = None,
        verdict_only: bool = False,
    ) -> Verdict:
        """Judge `patch` (a unified diff against task.repo). `verdict_only`: no feedback will
        be drawn from it, so the tests may stop at the first failure."""
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
        held: Sandbox | None = sandbox
        try:
            check = self._check(changed)
            check.verdict_only = verdict_only
            first = [v for v in self.verifiers if v.name != "mypy"]
            late = [v for v in self.verifiers if v.name == "mypy"]
            results = run_cascade(Watched(sandbox), check, first, deadline=deadline)
            if late and all(r.status in ("passed", "skipped") for r in results):
                # mypy after the tests (most candidates fail those, and need no mypy then), on
                # a fresh copy in a reset sandbox: the tests ran candidate code in this one
                held = None  # refresh() releases it itself when it fails
                held, _ = self.pool.refresh(sandbox, lambda ws: self._fill(ws, patch))
                results += run_cascade(Watched(held), check, late, deadline=deadline)
        finally:
            if held is not None:
                self.pool.release(held)
        if log_dir is not None:
            for result in results:
                (log_dir / f"{result.name}.log").write_text(result.log, encoding="utf-8")
        return verdict_from(results, changed)

    def _copy_repo(self, workspace: Path) -> None:
        copy = make_workspace(self.task.repo, self.work_root)
        try:
            for entry in os.listdir(copy):
                os.rename(copy / entry, workspace / entry)
        finally:
            remove_workspace(copy)

    def _fill(self, workspace: Path, patch: str) -> list[str]:
        """Populate an empty workspace: the repo, the patch, the hidden tests and a private copy
        of the base's mypy cache (checked for the changed files already, so their imports are
        in it). Returns the paths the patch changed; raises PatchError (_HiddenTestsConflict)."""
        self._copy_repo(workspace)
        changed = apply_patch(workspace, patch, protected=self.task.protected)
        if self.task.test_patch:
            try:
                apply_patch(workspace, self.task.test_patch, trusted=True)
            except PatchError as exc:
                raise _HiddenTestsConflict(changed) from exc
        if self.task.verifiers.mypy:
            self._give_mypy_cache(workspace)
        return changed

    def _give_mypy_cache(self, workspace: Path) -> None:
        """Copy the base's current mypy cache (else the machine's seed) into `workspace`."""
        mypycache.prepare(workspace)
        with self._lock:
            source = self._base_cache or mypycache.seed_path(self.backend.name, self.task.repo)
        mypycache.copy_cache(source, workspace)

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

    def known_baseline(self, name: str, changed: list[str]) -> Baseline | None:
        """The baseline of `name` for these changed files, when it is fully known already."""
        files = python_files(self.task.repo, changed)
        with self._lock:
            known = self._baselines.setdefault(name, Baseline())
            return None if known.missing(files) else known.subset(changed)

    def baseline_in(
        self, sandbox: Sandbox, verifier: BaselineVerifier, check: CheckSpec
    ) -> Baseline:
        """The verifier's baseline for check.changed_files, computing what is missing in the
        candidate's own sandbox (no candidate code has run in it yet: ruff and mypy come before
        pytest) with every changed path put back as it is in the base for the run."""
        files = python_files(self.task.repo, check.changed_files)
        with self._lock:
            missing = self._baselines.setdefault(verifier.name, Baseline()).missing(files)
        if missing:
            spec = CheckSpec(changed_files=missing, timeout_s=check.timeout_s)
            with _as_base(sandbox.workspace, self.task.repo, check.changed_files):
                found = verifier.baseline(sandbox, spec)
                if verifier.name == "mypy":  # never keep this cache: the candidate's run wrote it
                    self._grow_cache_later(verifier, missing)
            with self._lock:
                self._baselines[verifier.name].merge(found)
        with self._lock:
            return self._baselines[verifier.name].subset(check.changed_files)

    def _missing(self, files: list[str]) -> list[tuple[BaselineVerifier, list[str]]]:
        """(verifier, files its baseline lacks) for each baseline-relative verifier."""
        todo: list[tuple[BaselineVerifier, list[str]]] = []
        with self._lock:
            for verifier in self.verifiers:
                if isinstance(verifier, BaselineVerifier):
                    known = self._baselines.setdefault(verifier.name, Baseline())
                    missing = known.missing(files)
                    if missing:
                        todo.append((verifier, missing))
        return todo

    def _ensure_baselines(self, changed: list[str]) -> None:
        """Compute the baselines still missing for these repo paths, once, in a pool sandbox
        holding the unpatched repo (warm-up: also warms the mypy cache candidates start from)."""
        files = python_files(self.task.repo, changed)
        if not files or not self._missing(files):
            return
        with self._base_lock:
            todo = self._missing(files)
            if not todo:
                return
            sandbox, _ = self.pool.acquire(self._fill_base)
            try:
                watched = Watched(sandbox)
                for verifier, missing in todo:
                    spec = CheckSpec(changed_files=missing, timeout_s=self.task.verifiers.timeout_s)
                    found = verifier.baseline(watched, spec)
                    with self._lock:
                        self._baselines[verifier.name].merge(found)
                for verifier, missing in todo:
                    if verifier.name == "mypy":  # a base-only run: its cache may be kept
                        self._keep_base_cache(sandbox.workspace)
                        with self._lock:
                            self._cached.update(missing)
            finally:
                self.pool.release(sandbox)

    def _grow_cache_later(self, verifier: BaselineVerifier, files: list[str]) -> None:
        """In the background, check `files` on the unpatched repo in a pool sandbox that never
        held candidate code, and keep that run's cache as the base cache (and the seed)."""
        with self._lock:
            todo = [path for path in files if path not in self._cached]
            if not todo or (self._cache_grower is not None and self._cache_grower.is_alive()):
                return
            self._cached.update(todo)

        def grow() -> None:
            try:
                sandbox, _ = self.pool.acquire(self._fill_base)
            except Exception:  # closing, or no sandbox: the cache just stays cooler
                return
            try:
                spec = CheckSpec(changed_files=todo, timeout_s=self.task.verifiers.timeout_s)
                verifier.baseline(Watched(sandbox), spec)
                self._keep_base_cache(sandbox.workspace)
            except Exception:
                pass
            finally:
                self.pool.release(sandbox)

        self._cache_grower = threading.Thread(target=grow, name="ooda-mypy-cache", daemon=True)
        self._cache_grower.start()

    def _fill_base(self, workspace: Path) -> None:
        """The unpatched repo, the hidden tests, and the base's mypy cache (else the seed)."""
        self._copy_repo(workspace)
        if self.task.test_patch:
            apply_patch(workspace, self.task.test_patch, trusted=True)
        if self.task.verifiers.mypy:
            self._give_mypy_cache(workspace)

    def _keep_base_cache(self, workspace: Path) -> None:
        """Keep the base's grown mypy cache on the host (a new copy, swapped in). Only for a
        workspace that never held candidate code (_ensure_baselines' pool sandbox)."""
        kept = self._fresh_dir(prefix="base-mypy-")
        if not mypycache.take_cache(workspace, mypycache.cache_dir(kept)):
            remove_workspace(kept)
            return
        with self._lock:
            self._base_cache = mypycache.cache_dir(kept)
            self._base_caches.append(kept)
            first = self._base_mypy_runs == 0
            self._base_mypy_runs += 1
        if first:
            mypycache.save_seed(mypycache.cache_dir(kept), self.backend.name, self.task.repo)

    def _fresh_dir(self, prefix: str = "base-") -> Path:
        self.work_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.work_root))

    # ------------------------------------------------------------------ base tests

    def run_base_tests(
        self, ids_or_cmd: list[str] | str | None = None, *, timeout_s: float | None = None
    ) -> dict[str, str]:
        """Per-test outcomes on the unpatched repo (+ test patch), for deriving fail_to_pass
        and pass_to_pass. Default: the task's own ids, else its test command.

        Raises ooda.verifiers.pytest_check.run.TestRunError (timeout, no report) and ValueError (a test
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
        sandbox, _ = self.pool.acquire(self._fill_base)
        try:
            return run_tests(sandbox, target, timeout_s or self.task.verifiers.timeout_s)
        finally:
            self.pool.release(sandbox)

    def close(self) -> None:
        """Release the pool (when this verifier made it) and the base's mypy caches (the
        backend stays open, unless an on_close callback closes it)."""
        for thread in (self._warmer, self._cache_grower):
            if thread is not None:
                thread.join(timeout=60)
        try:
            if self._own_pool:
                self.pool.close()
        finally:
            with self._lock:
                caches, self._base_caches, self._base_cache = self._base_caches, [], None
            for kept in caches:
                remove_workspace(kept)
            callbacks, self.on_close = self.on_close, []
            for callback in callbacks:
                callback()


class _Optimistic:
    """A baseline-relative stage (ruff, mypy) judged first as if the base were clean: a
    candidate with no findings needs no baseline at all, which saves the base's run on the
    critical path. Only when it reports something is the real baseline computed (once per file,
    then shared; see TaskVerifier.baseline_in) and the stage run again against it."""

    def __init__(self, inner: BaselineVerifier, owner: TaskVerifier) -> None:
        self.inner = inner
        self.owner = owner
        self.name = inner.name

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        return self.inner.baseline(sandbox, check)

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        stage = cast(Verifier, self.inner)
        known = self.owner.known_baseline(self.name, check.changed_files)
        if known is not None:
            check.baseline[self.name] = known
            return stage.verify(sandbox, check)
        clean = Baseline(files={path: [] for path in check.changed_files})
        first = stage.verify(sandbox, replace(check, baseline={**check.baseline, self.name: clean}))
        if first.status in ("passed", "timeout", "skipped"):
            return first
        check.baseline[self.name] = self.owner.baseline_in(sandbox, self.inner, check)
        result = stage.verify(sandbox, check)
        result.duration_s += first.duration_s
        return result


@contextlib.contextmanager
def _as_base(workspace: Path, repo: Path, changed: list[str]) -> Iterator[None]:
    """Within the block, every changed path of `workspace` is as in `repo` (the candidate's
    versions are moved aside, under .ooda/, and put back after)."""
    (workspace / REPORT_DIR).mkdir(exist_ok=True)
    stash = Path(tempfile.mkdtemp(prefix="base-swap-", dir=workspace / REPORT_DIR))
    owner = workspace.stat()
    moved: list[str] = []
    placed: list[Path] = []
    try:
        for path in dict.fromkeys(changed):
            here, there = workspace / path, repo / path
            if here.exists() or here.is_symlink():
                (stash / path).parent.mkdir(parents=True, exist_ok=True)
                os.rename(here, stash / path)
                moved.append(path)
            if there.is_file() and not there.is_symlink():
                here.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(there, here)
                if os.geteuid() == 0:
                    os.chown(here, owner.st_uid, owner.st_gid)
                placed.append(here)
        yield
    finally:
        for here in placed:
            here.unlink(missing_ok=True)
        for path in moved:
            os.rename(stash / path, workspace / path)
        remove_workspace(stash)


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
