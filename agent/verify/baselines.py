"""The unpatched code's side of verification, for one task: the ruff/mypy baselines (what the
base already has, so that only a candidate's new findings count), the base's mypy cache each
candidate's mypy starts from, and the base's own test run.

Baselines are computed once per file and shared by every candidate. A baseline-relative stage
is first judged as if the base were clean (`_Optimistic`): a candidate with no findings needs no
baseline at all. The base's mypy cache (and the machine's seed) is only ever taken from a
sandbox that held nothing but the unpatched repo, never from one where a candidate's patch or
code was (agent/verify/mypycache.py), and only as directories and regular files
(agent/support/fstree.py).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Protocol, runtime_checkable

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, Verifier, VerifierResult
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.support.fstree import remove_workspace
from ooda.agent.verify import mypycache
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.watched import Watched
from ooda.agent.verify.workspace import apply_patch, copy_repo
from ooda.verifiers import Baseline, python_files
from ooda.verifiers.mypy_check import MypyVerifier
from ooda.verifiers.pytest_check import REPORT_DIR, TestRun
from ooda.verifiers.runners import TestRequest, base_run


@runtime_checkable
class BaselineVerifier(Verifier, Protocol):
    """A verifier judged relative to the unpatched code (ruff, mypy)."""

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline: ...


class Baselines:
    """The baselines and the base's mypy cache of one task, computed lazily and once; safe to
    use from several threads (the task verifier's candidates)."""

    def __init__(
        self, plan: TaskPlan, repo: Path, backend_name: str, work_root: Path, pool: SandboxPool
    ) -> None:
        self.plan = plan
        """Read for its hidden tests and stages (never the test lists, which the verifier's
        `use` may settle later)."""
        self.repo = repo
        """The unpatched repository every base workspace is copied from (+ its environment's
        overlay)."""
        self.backend_name = backend_name
        self.work_root = work_root
        self.pool = pool
        self.stages: list[BaselineVerifier] = []
        self._lock = threading.Lock()
        """Guards _baselines and _base_cache (held briefly, never while waiting for a sandbox)."""
        self._base_lock = threading.Lock()
        """Serialises baseline computations in the pool (so each file is checked once)."""
        self._baselines: dict[str, Baseline] = {}
        self._base_cache: Path | None = None
        """The base's mypy cache on the host: what each candidate's mypy starts from."""
        self._base_caches: list[Path] = []
        self._base_mypy_runs = 0
        self._cache_grower: threading.Thread | None = None
        """Grows the base's mypy cache in a base-only sandbox after a candidate needed the
        baseline of files it lacked (that candidate's own cache is never kept)."""
        self._cached: set[str] = set()
        """Files the kept base cache has been checked for."""

    def wrap(self, stages: Sequence[Verifier]) -> list[Verifier]:
        """The cascade with each baseline-relative stage judged optimistically against these
        baselines (and remembered as one of them)."""
        wrapped: list[Verifier] = []
        for stage in stages:
            if isinstance(stage, BaselineVerifier):
                optimistic = _Optimistic(stage, self)
                self.stages.append(optimistic)
                wrapped.append(optimistic)
            else:
                wrapped.append(stage)
        return wrapped

    # ------------------------------------------------------------------ lookups

    def known_baseline(self, name: str, changed: list[str]) -> Baseline | None:
        """The baseline of `name` for these changed files, when it is fully known already."""
        files = python_files(self.repo, changed)
        with self._lock:
            known = self._baselines.setdefault(name, Baseline())
            return None if known.missing(files) else known.subset(changed)

    def baseline_in(
        self, sandbox: Sandbox, verifier: BaselineVerifier, check: CheckSpec
    ) -> Baseline:
        """The verifier's baseline for check.changed_files, computing what is missing in the
        candidate's own sandbox (no candidate code has run in it yet: ruff and mypy come before
        pytest) with every changed path put back as it is in the base for the run."""
        files = python_files(self.repo, check.changed_files)
        with self._lock:
            missing = self._baselines.setdefault(verifier.name, Baseline()).missing(files)
        if missing:
            spec = CheckSpec(changed_files=missing, timeout_s=check.timeout_s)
            with _as_base(sandbox.workspace, self.repo, check.changed_files):
                found = verifier.baseline(sandbox, spec)
                if _keeps_cache(verifier):  # never keep this cache: the candidate's run wrote it
                    self._grow_cache_later(verifier, missing)
            with self._lock:
                self._baselines[verifier.name].merge(found)
        with self._lock:
            return self._baselines[verifier.name].subset(check.changed_files)

    def _missing(self, files: list[str]) -> list[tuple[BaselineVerifier, list[str]]]:
        """(verifier, files its baseline lacks) for each baseline-relative verifier."""
        todo: list[tuple[BaselineVerifier, list[str]]] = []
        with self._lock:
            for verifier in self.stages:
                known = self._baselines.setdefault(verifier.name, Baseline())
                missing = known.missing(files)
                if missing:
                    todo.append((verifier, missing))
        return todo

    # ------------------------------------------------------------------ base runs

    def ensure(self, changed: list[str]) -> None:
        """Compute the baselines still missing for these repo paths, once, in a pool sandbox
        holding the unpatched repo (warm-up: also warms the mypy cache candidates start from)."""
        files = python_files(self.repo, changed)
        if not files or not self._missing(files):
            return
        with self._base_lock:
            todo = self._missing(files)
            if not todo:
                return
            sandbox, _ = self.pool.acquire(self.fill_base)
            try:
                watched = Watched(sandbox)
                for verifier, missing in todo:
                    spec = CheckSpec(changed_files=missing, timeout_s=self.plan.stages.timeout_s)
                    found = verifier.baseline(watched, spec)
                    with self._lock:
                        self._baselines[verifier.name].merge(found)
                for verifier, missing in todo:
                    if _keeps_cache(verifier):  # a base-only run: its cache may be kept
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
                sandbox, _ = self.pool.acquire(self.fill_base)
            except Exception:  # closing, or no sandbox: the cache just stays cooler
                return
            try:
                spec = CheckSpec(changed_files=todo, timeout_s=self.plan.stages.timeout_s)
                verifier.baseline(Watched(sandbox), spec)
                self._keep_base_cache(sandbox.workspace)
            except Exception:
                pass
            finally:
                self.pool.release(sandbox)

        self._cache_grower = threading.Thread(target=grow, name="ooda-mypy-cache", daemon=True)
        self._cache_grower.start()

    def run_tests(self, request: TestRequest) -> TestRun:
        """The run of `request` with the task's runner on the unpatched repo (+ test patch);
        raises TestRunError and NotGradable as verifiers/runners' base_run does."""
        sandbox, _ = self.pool.acquire(self.fill_base)
        try:
            return base_run(self.plan.runner, sandbox, request)
        finally:
            self.pool.release(sandbox)

    # ------------------------------------------------------------------ workspaces and caches

    def fill_base(self, workspace: Path) -> None:
        """The unpatched repo (unless the pool put it there), the hidden tests, and the base's
        mypy cache (else the seed)."""
        if self.pool.base is None:
            copy_repo(self.repo, self.work_root, workspace)
        if self.plan.tests.hidden_patch:
            apply_patch(workspace, self.plan.tests.hidden_patch, trusted=True)
        if self.plan.stages.mypy:
            self.give_mypy_cache(workspace)

    def give_mypy_cache(self, workspace: Path) -> None:
        """Copy the base's current mypy cache (else the machine's seed) into `workspace`."""
        mypycache.prepare(workspace)
        with self._lock:
            source = self._base_cache or mypycache.seed_path(self.backend_name, self.repo)
        mypycache.copy_cache(source, workspace)

    def _keep_base_cache(self, workspace: Path) -> None:
        """Keep the base's grown mypy cache on the host (a new copy, swapped in). Only for a
        workspace that never held candidate code (ensure()'s pool sandbox)."""
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
            mypycache.save_seed(mypycache.cache_dir(kept), self.backend_name, self.repo)

    def _fresh_dir(self, prefix: str = "base-") -> Path:
        self.work_root.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.work_root))

    def join(self, timeout_s: float = 60) -> None:
        """Wait for the background growth of the base's mypy cache, if any."""
        if self._cache_grower is not None:
            self._cache_grower.join(timeout=timeout_s)

    def close(self) -> None:
        """Remove the base's mypy caches kept on the host."""
        with self._lock:
            caches, self._base_caches, self._base_cache = self._base_caches, [], None
        for kept in caches:
            remove_workspace(kept)


def _keeps_cache(verifier: BaselineVerifier) -> bool:
    """Whether the stage's base run leaves a cache worth keeping: mypy's (mypycache.py)."""
    return verifier.name == MypyVerifier.name


class _Optimistic:
    """A baseline-relative stage (ruff, mypy) judged first as if the base were clean: a
    candidate with no findings needs no baseline at all, which saves the base's run on the
    critical path. Only when it reports something is the real baseline computed (once per file,
    then shared; see Baselines.baseline_in) and the stage run again against it."""

    def __init__(self, inner: BaselineVerifier, owner: Baselines) -> None:
        self.inner = inner
        self.owner = owner
        self.name = inner.name

    def baseline(self, sandbox: Sandbox, check: CheckSpec) -> Baseline:
        return self.inner.baseline(sandbox, check)

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        stage = self.inner
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
