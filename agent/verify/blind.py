"""What a task verifier checks in a blind run besides syntax, ruff, security and mypy: the
regression tests of each candidate (agent/verify/regression.py) and the model's reproduction
tests (agent/verify/repro_suite.py), both run on the unpatched code first, in a sandbox of
the verifier's pool that holds nothing else.

The verifier of a blind run is made on the visible task (tasks/hidden.py): its workspaces hold
the repository at its base and the candidate's patch, never the hidden tests.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ooda.agent.contracts.protocols import CheckSpec, ReproTest, Sandbox
from ooda.agent.sandbox.pool import SandboxPool
from ooda.agent.verify.regression import Regression, RegressionTests
from ooda.agent.verify.repro_suite import ReproSuite
from ooda.agent.verify.watched import Watched
from ooda.agent.verify.workspace import PatchError, patch_paths
from ooda.verifiers import coverage_probe
from ooda.verifiers.repro_check import SCRIPT_TIMEOUT_S, ScriptRun, run_script
from ooda.verifiers.runners import TestRequest, TestRunner, base_run


@dataclass(frozen=True)
class BlindSpec:
    """One candidate's blind checks."""

    regression: Regression
    reproduction: list[ReproTest]

    def apply(self, check: CheckSpec) -> CheckSpec:
        """`check` (made for the visible task, which has no test lists) with these tests."""
        ids = list(self.regression.ids)
        return dataclasses.replace(
            check, fail_to_pass=[], pass_to_pass=ids, passed_before=ids,
            whole_files=self.regression.whole_files,
            test_files=list(self.regression.files), tests_optional=True,
            reproduction=list(self.reproduction))


class BlindChecks:
    """A blind run's regression and reproduction tests for one task verifier."""

    def __init__(self, repo: Path, pool: SandboxPool, fill_base: Callable[[Path], None],
                 runner: TestRunner, *, runner_cmd: str | None, pre_test: Sequence[str],
                 timeout_s: float) -> None:
        self.pool = pool
        self.fill_base = fill_base
        self.runner = runner
        self.runner_cmd = runner_cmd
        self.pre_test = tuple(pre_test)
        self.regression = RegressionTests(repo, self._run_file, timeout_s, cover=self._cover,
                                          run_ids=self._run_ids)
        self.suite = ReproSuite(self._run_scripts)

    def spec_for(self, patch: str, deadline: float | None) -> BlindSpec:
        """The candidate's checks; waits for the reproduction tests to be judged on the base
        (see ReproSuite.wait). Call before taking a sandbox for the candidate: the base runs
        need one of the pool's."""
        try:
            changed = patch_paths(patch)
        except PatchError:
            changed = []
        return BlindSpec(self.regression.for_change(changed, patch), self.suite.wait(deadline))

    def record(self) -> dict[str, object]:
        """What run.json keeps of the regression tests: each file run on the base, each
        coverage run."""
        return {"regression_files": self.regression.record(),
                "coverage": self.regression.coverage_record()}

    def _run_file(self, path: str, timeout_s: float) -> dict[str, str]:
        """One test file, whole, on the unpatched code, with the task's runner."""
        request = TestRequest(ids=(path,), runner_cmd=self.runner_cmd, test_files=(path,),
                              whole_files=True, timeout_s=timeout_s, pre_test=self.pre_test)
        return self._base_outcomes(request)

    def _run_ids(self, ids: tuple[str, ...], timeout_s: float) -> dict[str, str]:
        """These tests (of one file), by id, on the unpatched code, with the task's runner."""
        files = tuple(dict.fromkeys(i.split("::", 1)[0] for i in ids))
        request = TestRequest(ids=ids, runner_cmd=self.runner_cmd, test_files=files,
                              whole_files=False, timeout_s=timeout_s, pre_test=self.pre_test)
        return self._base_outcomes(request)

    def _base_outcomes(self, request: TestRequest) -> dict[str, str]:
        """Each test's outcome of `request` on the unpatched code, in a sandbox of the pool."""
        sandbox, _ = self.pool.acquire(self.fill_base)
        try:
            return dict(base_run(self.runner, Watched(sandbox), request).outcomes)
        finally:
            self.pool.release(sandbox)

    def _cover(self, files: list[str], targets: list[str], timeout_s: float
               ) -> coverage_probe.Calls | None:
        """The functions of `targets` each test of `files` calls on the unpatched code
        (verifiers/coverage_probe.py), in a sandbox of the pool."""
        test = ReproTest("ooda_coverage", coverage_probe.script(files, targets), False)
        sandbox, _ = self.pool.acquire(self.fill_base)
        try:
            run = run_script(Watched(sandbox), test, timeout_s, list(self.pre_test))
        finally:
            self.pool.release(sandbox)
        return coverage_probe.calls(run.output)

    def _run_scripts(self, tests: list[ReproTest], deadline: float) -> list[ScriptRun]:
        """Each script on the unpatched code, one after the other, in one sandbox."""
        sandbox: Sandbox
        sandbox, _ = self.pool.acquire(self.fill_base)
        runs: list[ScriptRun] = []
        try:
            watched = Watched(sandbox)
            for test in tests:
                left = deadline - time.monotonic()
                if left <= 0:
                    runs.append(ScriptRun(test.name, "timeout", "", "", 0.0))
                    continue
                runs.append(run_script(watched, test, min(SCRIPT_TIMEOUT_S, left),
                                       list(self.pre_test)))
        finally:
            self.pool.release(sandbox)
        return runs
