"""Verify a candidate patch for one task: the use case behind `ooda verify` and the loop.

For each candidate: take a warm sandbox from the pool (agent/sandbox/pool.py), fill its
workspace with a copy of the task's repo, apply the candidate's patch (the edit policy applies),
then the task's hidden test patch, and run the verifier cascade in its one order
(verifiers/cascade.py): syntax, ruff, pytest, then the stages that run only after the tests
pass (mypy), in the reset sandbox on a fresh copy, as no candidate code may have run where mypy
looks (or, when a second sandbox is idle and no other candidate is under way, on a fresh copy
there, beside the tests: agent/verify/spare.py). Ruff and mypy are judged against a baseline of the unpatched code (base + test patch),
computed once per file (agent/verify/baselines.py); each candidate's mypy starts from a copy of
the base's warm cache (agent/verify/mypycache.py). A broken sandbox ends the run as an
infrastructure error (agent/verify/watched.py). `warm()` starts the sandboxes and the
baselines ahead of the first candidate; a plan with its own environment has it built once,
here, and every sandbox opens on it (agent/verify/environment.py).

Everything about the task comes from its plan (agent/verify/plan.py): the environment, the
runner, the stages, the tests and what the base showed. The plan is settled before the first
candidate (agent/verify/prepare.py runs the base through `run_base` and hands the settled plan
over with `use`); a Task given instead of a plan stands for its default plan (its own
environment, no choices of the user's).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from ooda.agent.contracts.errors import InfraError, VerificationStopped
from ooda.agent.contracts.protocols import (
    CheckSpec,
    ReproOnBase,
    ReproTest,
    Sandbox,
    SandboxBackend,
    Verdict,
    Verifier,
    VerifierResult,
)
from ooda.agent.contracts.spectrum import BaseTrace
from ooda.agent.sandbox.overlay import shared_base
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.support import fstree
from ooda.agent.support.collected import Collected, collected, doctest_changes
from ooda.agent.verify import base_trace
from ooda.agent.verify.admit import Admitted, admit
from ooda.agent.verify.admit import summary as admit_summary
from ooda.agent.verify.baselines import Baselines
from ooda.agent.verify.blind import BlindChecks, BlindSpec
from ooda.agent.verify.environment import EnvironmentBackend, PreparedEnv, prepare_environment
from ooda.agent.verify.harness_apply import apply_prediction, restore_test_files
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.agent.verify.spare import SpareLane
from ooda.agent.verify.watched import FEEDBACK_LIMIT, Watched, verdict_from
from ooda.agent.verify.workspace import (
    COPY_EXCLUDES,
    PatchError,
    apply_patch,
    changed_lines,
    copy_repo,
)
from ooda.tasks.loader import Task
from ooda.verifiers import clip
from ooda.verifiers.cascade import (
    CONTINUE,
    build,
    run_cascade,
    split_at_tests,
    split_host_first,
)
from ooda.verifiers.hidden import HiddenText
from ooda.verifiers.pytest_check import TestRun
from ooda.verifiers.pytest_check.grade import FAILING
from ooda.verifiers.repro_check import ReproVerifier
from ooda.verifiers.runners import TestRequest
from ooda.verifiers.settings import StageSettings
from ooda.verifiers.tests_stage import NAME as TESTS_STAGE

ApplyRule = Literal["strict", "drop", "harness"]

WARM_MAX_FILES = 40
"""warm() computes the baselines of every source file only for repos with at most this many."""
WARM_SKIP = frozenset({"tests", "test", "docs", "node_modules", "build", "dist", "__pycache__"})


class TaskVerifier:
    """Verifies candidate patches for one task; computes the ruff/mypy baselines once (lazily)
    and reuses them. verify() may be called from several threads at once."""

    def __init__(
        self,
        plan: TaskPlan | Task,
        backend: SandboxBackend,
        work_root: Path,
        *,
        concurrency: int = 2,
        pool: SandboxPool | None = None,
        retry_failed_environment: bool = False,
        apply_rule: ApplyRule = "strict",
        blind: bool = False,
    ) -> None:
        """`blind`: `task` is a blind run's visible task (tasks/hidden.py); candidates are
        checked against regression tests and the reproduction tests handed to
        `adopt_reproduction`, which every verify() waits for (agent/verify/blind.py)."""
        self.plan = plan if isinstance(plan, TaskPlan) else draft_plan(plan)
        """How the task is judged (agent/verify/plan.py); `use` hands over the settled one."""
        self.apply_rule: ApplyRule = apply_rule
        """"strict": ooda's edit policy; "drop" (the loop's candidates): the same, but a
        candidate that also changes tests or configuration is judged without those files
        (agent/verify/admit.py) instead of refused whole; "harness": as the SWE-bench harness
        applies a prediction (agent/verify/harness_apply.py)."""
        self.backend = backend
        self.work_root = work_root
        work_root.mkdir(parents=True, exist_ok=True)
        repo = self.plan.task.repo
        self.base_repo = repo
        """What every workspace is copied from: the repo (+ its environment's overlay)."""
        self.environment: PreparedEnv | None = None
        if self.plan.environment is not None:
            # built once per hash, before any sandbox: every slot of the pool opens on it
            self.environment = prepare_environment(
                self.plan.environment, repo, backend, work_root,
                retry_failed=retry_failed_environment,
            )
            self.base_repo = self.environment.base_repo
            backend = EnvironmentBackend(backend, self.environment)
        self.pool = pool or SandboxPool(
            backend, work_root, requirements=self.plan.requirements, size=concurrency,
            base=self._copy_base,  # copied into an emptied slot ahead of need
            shared=None if pool is not None else shared_base(
                self.base_repo, work_root, getattr(backend, "workspace_owner", None),
                COPY_EXCLUDES.__contains__),  # else mounted copy-on-write (large repos)
        )
        self._own_pool = pool is None
        self.baselines = Baselines(self.plan, self.base_repo, backend.name, work_root, self.pool)
        stages = self.plan.stages
        self.verifiers: list[Verifier] = self.baselines.wrap(
            build(stages.on, StageSettings(self.plan.runner, stages.security_rules),
                  blind=blind)
        )
        self._warmer: threading.Thread | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._in_flight = 0
        """verify() calls under way."""
        self._failed_by: Counter[str] = Counter()
        """How many of this verifier's candidates each required test failed (the tests most
        likely to fail the next one run first when only its verdict matters)."""
        self._lanes: list[SpareLane] = []
        """Late stages run beside the tests (agent/verify/spare.py), joined on close()."""
        self.test_time_cap: float | None = None
        """At most this many seconds for a candidate's tests (`limit_test_time`), else the
        plan's timeout."""
        self.applied_by = ""
        """The harness rule: how the last prediction went in ("git apply", "patch --fuzz=5")."""
        self._collected: tuple[TaskPlan, Collected] | None = None
        self._hidden: HiddenText | None = None
        """The hidden tests' lines, withheld from every verdict (made at the first verdict)."""
        self.on_close: list[Callable[[], None]] = []
        """Called at the end of close() (e.g. to close a backend opened for this verifier)."""
        self.blind = BlindChecks(
            self.base_repo, self.pool, self.baselines.fill_base, self.plan.runner,
            runner_cmd=self.plan.runner_cmd, pre_test=self.plan.pre_test,
            timeout_s=self.plan.stages.timeout_s,
        ) if blind else None
        """A blind run's regression and reproduction tests (None: the task's own tests)."""

    @property
    def task(self) -> Task:
        """The task as candidates are judged against it (the plan's test lists)."""
        return self.plan.judged_task()

    def use(self, plan: TaskPlan) -> None:
        """Judge candidates by `plan` from now on: the same task and environment, settled
        (its base facts; its test lists derived from a test command). Before the first
        verify()."""
        self.plan = plan

    # ------------------------------------------------------------------ before the first candidate

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
                self.baselines.ensure(files)
        except Exception:  # a warm-up problem shows again, properly, on the first candidate
            pass

    def _warm_files(self) -> list[str]:
        """The repo's non-test Python files, when there are few enough to check them all."""
        found: list[str] = []
        repo = self.plan.task.repo
        for dirpath, dirnames, filenames in fstree.walk(repo):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d not in WARM_SKIP]
            rel = os.path.relpath(dirpath, repo)
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
        stop: threading.Event | None = None,
    ) -> Verdict:
        """Judge `patch` (a unified diff against task.repo). `verdict_only`: no feedback will
        be drawn from it, so the tests may stop at the first failure. `stop` set meanwhile
        (the run was decided): VerificationStopped, the command running interrupted."""
        if stop is not None and stop.is_set():
            raise VerificationStopped()
        with self._lock:
            self._in_flight += 1
        try:
            if self.apply_rule == "drop":
                admitted = admit(patch, self.plan.task.protected, self.collected_tests.patterns)
                if admitted.dropped:
                    return self._judged_without(admitted, patch, log_dir, deadline,
                                                verdict_only, stop)
            return self._verify(patch, log_dir, deadline, verdict_only, stop)
        finally:
            with self._lock:
                self._in_flight -= 1

    def _judged_without(
        self, admitted: Admitted, given: str, log_dir: Path | None, deadline: float | None,
        verdict_only: bool, stop: threading.Event | None,
    ) -> Verdict:
        """The candidate judged with the files the policy protects left out (its logs:
        patch.diff what was judged, proposed.diff what was given); an invalid edit when
        nothing else is left."""
        first = admitted.dropped[0]
        if not admitted.patch.strip():
            if log_dir is not None:
                log_dir.mkdir(parents=True, exist_ok=True)
                (log_dir / "patch.diff").write_text(given, encoding="utf-8",
                                                    errors="backslashreplace")
            verdict = self._invalid(f"{first.reason} (it changes only files the policy keeps "
                                    "out of the judged tree: nothing is left to judge)",
                                    log_dir, kind=first.kind)
        else:
            verdict = self._verify(admitted.patch, log_dir, deadline, verdict_only, stop)
            verdict.patch = admitted.patch
            note = admit_summary(admitted.dropped)
            verdict.feedback = f"{note}\n{verdict.feedback}" if verdict.feedback else note
            if log_dir is not None:
                (log_dir / "proposed.diff").write_text(given, encoding="utf-8",
                                                       errors="backslashreplace")
        verdict.dropped = list(admitted.dropped)
        return verdict

    def _verify(
        self, patch: str, log_dir: Path | None, deadline: float | None, verdict_only: bool,
        stop: threading.Event | None = None,
    ) -> Verdict:
        if log_dir is not None:
            log_dir.mkdir(parents=True, exist_ok=True)
            # as given, even when it is not valid text (the policy then rejects it)
            (log_dir / "patch.diff").write_text(patch, encoding="utf-8", errors="backslashreplace")
        blind = self.blind.spec_for(patch, deadline) if self.blind else None
        try:
            sandbox, changed = self.pool.acquire(
                lambda workspace: self._fill(workspace, patch, late=False))
        except _HiddenTestsConflict as exc:
            return self._invalid(
                "the task's hidden tests no longer apply on top of this patch: it "
                "changes lines the tests' own patch changes; leave those files alone",
                log_dir,
                exc.changed,
                kind="conflicts_with_tests",
            )
        except PatchError as exc:
            return self._invalid(f"{exc}", log_dir, kind=exc.kind)
        held: Sandbox | None = sandbox
        lane: SpareLane | None = None
        try:
            check = self._check_for(patch, changed, blind, verdict_only)
            first, late = split_at_tests(self.verifiers)
            host, in_sandbox = split_host_first(first)
            if verdict_only:  # no feedback follows: the tests first, where most candidates
                # fail (ruff's verdict after them: a passing run left the files unchanged)
                in_sandbox.sort(key=lambda stage: stage.name != TESTS_STAGE)
            results = run_cascade(Watched(sandbox, stop), check, host, deadline=deadline)
            moved: list[Verifier] = []
            if _passed(results):
                if late and self._alone():
                    # a second sandbox is idle and nobody waits: the late stages there, now;
                    # with the tests first, the stages after them too (ruff): off the path
                    if verdict_only and self.blind is None:
                        moved = [v for v in in_sandbox if v.name != TESTS_STAGE]
                        in_sandbox = [v for v in in_sandbox if v.name == TESTS_STAGE]
                        late = [*moved, *late]
                    lane = self._lane(SpareLane(self.pool, lambda ws: self._fill(ws, patch),
                                                check, late, deadline, stop))
                results += run_cascade(Watched(sandbox, stop), check, in_sandbox,
                                       deadline=deadline)
            weighed = self._weighed_late(results, first, late)
            if weighed:  # a blind run's evidence on a candidate that broke a regression test
                held = None
                held, _ = self.pool.refresh(sandbox, lambda ws: self._fill(ws, patch))
                results += run_cascade(Watched(held, stop), check, weighed, deadline=deadline)
            elif late and _passed(results) and len(results) == len(first) - len(moved):
                late_results = self._late_results(lane)
                lane = None
                if late_results is None:
                    # after the tests (most candidates fail those, and need no mypy then), on
                    # a fresh copy in a reset sandbox: the tests ran candidate code in this one
                    held = None  # refresh() releases it itself when it fails
                    held, _ = self.pool.refresh(sandbox, lambda ws: self._fill(ws, patch))
                    late_results = run_cascade(Watched(held, stop), check, late,
                                               deadline=deadline)
                results += late_results
        finally:
            if lane is not None:
                lane.drop()  # an earlier stage did not pass (or raised): not needed
            if held is not None:
                self.pool.release(held)
        if log_dir is not None:
            for result in results:
                (log_dir / f"{result.name}.log").write_text(result.log, encoding="utf-8")
        self._count_failures(results)
        return self._withhold_hidden(verdict_from(results, changed))

    def _count_failures(self, results: list[VerifierResult]) -> None:
        """Remember which required tests this candidate failed (not those -x left unrun)."""
        for result in results:
            required = result.details.get("required") if result.name == TESTS_STAGE else None
            if isinstance(required, dict):
                failed = [t for t, outcome in required.items() if outcome in FAILING]
                with self._lock:
                    self._failed_by.update(failed)

    def _likely_failures_first(self, check: CheckSpec) -> None:
        """For a verdict-only run (pytest -x), each group of required tests (fail_to_pass,
        then pass_to_pass) ordered by how many earlier candidates failed each, as pytest's
        --failed-first does: a failing candidate stops at its first failure sooner. Ties keep
        the task's order; nothing else changes (the grade is per test)."""
        with self._lock:
            if not self._failed_by:
                return
            counts = dict(self._failed_by)
        check.fail_to_pass = sorted(check.fail_to_pass, key=lambda t: -counts.get(t, 0))
        check.pass_to_pass = sorted(check.pass_to_pass, key=lambda t: -counts.get(t, 0))

    def _check_for(self, patch: str, changed: list[str], blind: BlindSpec | None,
                   verdict_only: bool) -> CheckSpec:
        """What the stages check of this candidate."""
        check = self._check(changed)
        if self.apply_rule != "harness":  # (a prediction may apply with fuzz: all lines)
            check.changed_lines = changed_lines(patch)
        if blind is not None:
            check = blind.apply(check)
        check.verdict_only = verdict_only
        if verdict_only and self.blind is None:  # (a blind run compares candidates by which
            self._likely_failures_first(check)  # tests they break: one order for all)
        return check

    def _weighed_late(self, results: list[VerifierResult], first: list[Verifier],
                      late: list[Verifier]) -> list[Verifier]:
        """In a blind run, the reproduction stage for a candidate whose regression tests alone
        failed: the blind selection weighs a broken test against the reproduction tests and the
        issue's examples (agent/core/blind_select.py), so it needs them; [] otherwise."""
        if self.blind is None or len(results) != len(first):
            return []
        failed = [r for r in results if r.status not in CONTINUE]
        if len(failed) != 1 or failed[0].name != TESTS_STAGE:
            return []
        return [v for v in late if v.name == ReproVerifier.name]

    def _alone(self) -> bool:
        """Whether this is the only candidate being verified (a lane must not take the
        sandbox another candidate is about to need)."""
        with self._lock:
            return self._in_flight == 1

    def _lane(self, lane: SpareLane) -> SpareLane:
        with self._lock:
            self._lanes = [x for x in self._lanes if x.running()] + [lane]
        return lane

    @staticmethod
    def _late_results(lane: SpareLane | None) -> list[VerifierResult] | None:
        """The lane's results; None when there was none, none was idle or it failed for a
        reason of its own (the late stages then run after the tests, as without a lane; a
        broken sandbox, InfraError, ends the run)."""
        if lane is None:
            return None
        try:
            return lane.results()
        except InfraError:
            raise
        except Exception:  # noqa: BLE001 - the same stages run again the ordinary way
            return None

    def _withhold_hidden(self, verdict: Verdict) -> Verdict:
        """The verdict with every line of the hidden tests taken out of what the model reads
        (its reason, feedback and each stage's summary; the logs on disk keep everything):
        the candidate's code could have read them and put them in its output."""
        if self._hidden is None:
            self._hidden = HiddenText(self.plan.hidden().lines)
        hidden = self._hidden
        if hidden:
            for result in verdict.results:
                result.summary = hidden.withhold(result.summary)
            verdict.reason = hidden.withhold(verdict.reason)
            verdict.feedback = hidden.withhold(verdict.feedback)
        return verdict

    def _fill(self, workspace: Path, patch: str, *, late: bool = True) -> list[str]:
        """Populate a workspace: the repo (unless the pool put it there), the patch, the hidden
        tests and, for the after-tests stages (`late`), a private copy of the base's mypy cache
        (checked for the changed files already, so their imports are in it): mypy never runs
        where the tests ran, so the first workspace of a candidate goes without. Returns the
        paths the patch changed; raises PatchError (_HiddenTestsConflict)."""
        plan = self.plan
        if self.pool.base is None:
            self._copy_base(workspace)
        changed = self._apply(workspace, patch)
        if plan.tests.hidden_patch:
            try:
                apply_patch(workspace, plan.tests.hidden_patch, trusted=True)
            except PatchError as exc:
                raise _HiddenTestsConflict(changed) from exc
        if plan.stages.mypy and late:
            self.baselines.give_mypy_cache(workspace)
        return changed

    def _copy_base(self, workspace: Path) -> None:
        copy_repo(self.base_repo, self.work_root, workspace)

    def _apply(self, workspace: Path, patch: str) -> list[str]:
        """The candidate into the workspace by the verifier's rule; the changed paths."""
        if self.apply_rule != "harness":
            tests = self.collected_tests
            changed = apply_patch(workspace, patch, protected=self.plan.task.protected,
                                  tests=tests.patterns)
            rewritten = doctest_changes(self.base_repo, workspace, changed, tests,
                                        every_module=self.plan.tests.test_cmd is not None)
            if rewritten:
                raise PatchError(
                    f"{rewritten[0]}: this changes doctest examples the test run collects as "
                    "tests; edits to tests are not part of a solution, so change the code "
                    "under test instead", "test_file")
            return changed
        applied = apply_prediction(workspace, patch)
        self.applied_by = applied.method
        restore_test_files(workspace, self.base_repo, list(self.plan.tests.hidden_files),
                           applied.changed)
        return applied.changed

    @property
    def collected_tests(self) -> Collected:
        """The files the repository's own pytest collects as tests (its configuration, the
        base's files of the required ids): protected like tests/ (agent/support/collected.py).
        The hidden test files are not named here (a refusal would tell the model which they
        are); the hidden patch applied after the candidate's settles those."""
        plan = self.plan
        known = self._collected
        if known is not None and known[0] is plan:
            return known[1]
        tests = plan.tests
        # the ids the base run saw too (a test command's tests, whatever collected them)
        seen = list(plan.base.outcomes) if plan.base is not None else []
        found = collected(self.base_repo, [*tests.fail_to_pass, *tests.pass_to_pass, *seen], [],
                          tests.test_cmd)
        self._collected = (plan, found)
        return found

    def _check(self, changed: list[str]) -> CheckSpec:
        plan = self.plan
        base = plan.base
        return CheckSpec(
            changed_files=changed,
            fail_to_pass=list(plan.tests.fail_to_pass),
            pass_to_pass=list(plan.tests.pass_to_pass),
            test_cmd=plan.tests.test_cmd,
            timeout_s=plan.stages.timeout_s,
            tests_timeout_s=self.test_time_cap,
            whole_files=plan.tests.whole_files,
            passed_before=None if base is None else sorted(base.pass_to_pass_passing),
            unjudgeable={} if base is None else dict(base.environmental),
            runner_cmd=plan.runner_cmd,
            pre_test=list(plan.pre_test),
            test_files=list(plan.tests.hidden_files),
        )

    @staticmethod
    def _invalid(reason: str, log_dir: Path | None, changed: list[str] | None = None,
                 *, kind: str) -> Verdict:
        if log_dir is not None:
            (log_dir / "apply.log").write_text(reason + "\n", encoding="utf-8")
        first = reason.strip().splitlines()[0] if reason.strip() else "the patch was rejected"
        return Verdict(
            status="invalid_edit",
            reason=f"invalid edit: {first}",
            results=[],
            feedback=clip(reason, FEEDBACK_LIMIT),
            changed_files=changed or [],
            kind=kind,
        )

    def adopt_reproduction(self, tests: list[ReproTest], *, deadline: float) -> list[ReproOnBase]:
        """A blind run's reproduction tests (the ReproJudge protocol): judged on the base,
        the failing ones kept for every candidate from then on."""
        if self.blind is None:
            raise RuntimeError("adopt_reproduction: this verifier was not made blind")
        return self.blind.suite.adopt(tests, deadline)

    # ------------------------------------------------------------------ base tests

    def run_base(self, target: list[str] | str, *, timeout_s: float | None = None) -> TestRun:
        """The run of `target` (test ids, or a test command) on the unpatched repo (+ the
        hidden tests), with the plan's runner; an id that matched nothing is "missing".

        Raises ooda.verifiers.pytest_check.TestRunError (timeout, no report) and NotGradable,
        a ValueError (a test command the runner cannot grade per test)."""
        plan = self.plan
        request = TestRequest(
            ids=tuple(target) if isinstance(target, list) else (),
            command=target if isinstance(target, str) else None,
            runner_cmd=plan.runner_cmd, test_files=plan.tests.hidden_files,
            whole_files=plan.tests.whole_files,
            timeout_s=timeout_s or plan.stages.base_run_timeout_s,
            pre_test=plan.pre_test)
        return self.baselines.run_tests(request)

    def trace_base(self, *, deadline: float | None = None) -> BaseTrace:
        """The plan's tests traced on the unpatched code, for fault localisation (the
        TracesBase protocol; agent/verify/base_trace.py)."""
        return base_trace.trace_base(self, deadline=deadline)

    def limit_test_time(self, seconds: float) -> None:
        """Each candidate's tests get at most `seconds` from now on (TracesBase)."""
        self.test_time_cap = max(0.1, seconds)

    def run_base_tests(
        self, ids_or_cmd: list[str] | str | None = None, *, timeout_s: float | None = None
    ) -> dict[str, str]:
        """Per-test outcomes on the unpatched repo (+ hidden tests): `run_base`'s, of the
        plan's ids by default, else its test command."""
        tests = self.plan.tests
        target = ids_or_cmd if ids_or_cmd is not None else (
            list(tests.ids) if tests.ids else tests.test_cmd or "pytest")
        return dict(self.run_base(target, timeout_s=timeout_s).outcomes)

    def close(self) -> None:
        """Release the pool (when this verifier made it) and the base's mypy caches (the
        backend stays open, unless an on_close callback closes it). Once: closing again does
        nothing."""
        if self._closed:
            return
        self._closed = True
        if self._warmer is not None:
            self._warmer.join(timeout=60)
        with self._lock:
            lanes, self._lanes = self._lanes, []
        for lane in lanes:
            lane.join(timeout_s=60)
        self.baselines.join(timeout_s=60)
        try:
            if self._own_pool:
                self.pool.close()
        finally:
            self.baselines.close()
            callbacks, self.on_close = self.on_close, []
            for callback in callbacks:
                callback()


def _passed(results: list[VerifierResult]) -> bool:
    return all(r.status in CONTINUE for r in results)


class _HiddenTestsConflict(PatchError):
    """The task's test patch does not apply on top of the candidate's patch."""

    def __init__(self, changed: list[str]) -> None:
        super().__init__("the hidden tests do not apply")
        self.changed = changed
