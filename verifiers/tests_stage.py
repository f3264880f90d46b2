"""The tests stage of the cascade: runs the task's tests with the task's runner
(verifiers/runners/: pytest under the guard, Django's runtests.py, sympy's bin/test) and grades
them per the SPEC (verifiers/pytest_check/grade.py): every required id must have run and
passed; with a test command instead of ids, no test may fail and those that passed on the base
must pass. Its verdict comes from the runner's report (pytest's own, cross-checked with the
guard's record) or its per-test output lines, never from an exit status alone.

The stage is recorded under the name "pytest", whatever the runner, so that records of every
run read alike (attempts.jsonl, `last failed`, the logs' `pytest.log`).
"""

from __future__ import annotations

import re

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult
from ooda.verifiers import SUMMARY_LIMIT, clip, tail
from ooda.verifiers.environmental import environmental_reason
from ooda.verifiers.pytest_check.grade import FAILING, Graded, grade, run_log, summarize
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import PreTestFailed
from ooda.verifiers.runners import NotGradable, TestRequest, TestRunner, runner_for
from ooda.verifiers.settings import StageSettings

HIDDEN_READ_NOTE = (
    "note: the code under test read the task's hidden test file(s) {files} while the tests "
    "ran, so only which tests failed is said here, not how"
)
NAME = "pytest"
"""The stage's name in records (kept from when pytest was its only runner)."""


def tests_timeout(check: CheckSpec) -> float:
    """How long the tests may run: their own limit when one is set, else the stages'."""
    return min(check.timeout_s, check.tests_timeout_s or check.timeout_s)


def request_of(check: CheckSpec) -> TestRequest:
    """What the runner is asked to run for a candidate."""
    return TestRequest(
        ids=(*check.fail_to_pass, *check.pass_to_pass),  # the failing ones first
        command=check.test_cmd,
        runner_cmd=check.runner_cmd,
        test_files=tuple(check.test_files),
        whole_files=check.whole_files,
        timeout_s=tests_timeout(check),
        pre_test=tuple(check.pre_test),
        changed_files=tuple(check.changed_files),
        changed_lines=tuple((path, first, last) for path, spans in check.changed_lines.items()
                            for first, last in spans),
        # no feedback needed: stop at the first failure (the fail_to_pass tests run first)
        stop_at_first_failure=check.verdict_only,
    )


COVERAGE_THRESHOLD = re.compile(
    r"^(?:FAIL Required test coverage of [\d.]+% not reached|"
    r"(?:ERROR: )?Coverage failure: total of [\d.]+ is less than fail-under=)", re.M)
"""pytest-cov's line when a `--cov-fail-under` (a repository's addopts) failed the session."""


def coverage_threshold_only(run: TestRun) -> bool:
    """pytest exited 1 only because a coverage threshold of the repository's addopts was not
    reached: true of the subsets of tests ooda runs, and no verdict on them (the report and
    the guard's record still decide every test)."""
    return (run.exit_code == 1 and run.pytest_exit_code == 1
            and COVERAGE_THRESHOLD.search(run.output) is not None)


MAX_NOTED = 3


def _machine_again(graded: Graded, run: TestRun, check: CheckSpec) -> str | None:
    """Why `graded`, a required test that failed, is not the candidate's failure: it failed
    on the unpatched code for the machine's reason (no network here) and fails again for that
    same reason; None otherwise (a reason the candidate's code alone produced counts)."""
    before = check.unjudgeable.get(graded.node) or check.unjudgeable.get(graded.test_id)
    if before is None or graded.outcome not in FAILING:
        return None
    now = environmental_reason(run.messages.get(graded.node, ""))
    return now if now == before else None


def _shown(run: TestRun) -> str:
    """The run's output as feedback may quote it: none when the code under test read the
    hidden tests (it could have printed them)."""
    return "[output withheld: the code under test read the hidden tests]" if run.hidden_reads \
        else run.output


def _quiet(run: TestRun) -> str:
    """When the code under test read the hidden tests: drop the failure messages (they may
    carry what it read) and return the note that says so; else ""."""
    if not run.hidden_reads:
        return ""
    run.messages.clear()
    return HIDDEN_READ_NOTE.format(files=", ".join(run.hidden_reads[:3]))


class TestsVerifier:
    """Runs the task's tests (ids, or a test command) with one runner and grades them."""

    __test__ = False
    name = NAME

    def __init__(self, runner: TestRunner | None = None) -> None:
        self.runner = runner or runner_for("pytest")

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        if check.tests_optional and not (check.fail_to_pass or check.pass_to_pass
                                         or check.test_cmd):
            return VerifierResult(self.name, "skipped", 0.0, "", "no regression test applies")
        request = request_of(check)
        try:
            run = self.runner.run(sandbox, request)
        except NotGradable as exc:
            return VerifierResult(self.name, "error", 0.0, str(exc), str(exc))
        except PreTestFailed as exc:  # the environment's commands, not the code under test
            return VerifierResult(self.name, "error", 0.0, clip(str(exc), SUMMARY_LIMIT), str(exc))
        note = _quiet(run)
        early = (self._over_limit(run) or self._untrusted(run)
                 or self._no_report(run, tests_timeout(check)))
        if early:
            return early
        if request.ids:
            result = self._graded(run, check)
        else:
            result = self._all_graded(run, check)
        if run.stopped_at is not None and result.status == "passed":
            # a run ended early carries no signed record: it can only ever fail a candidate
            summary = (f"the test run ended at {run.stopped_at} without the guard's record, "
                       "yet its report shows every required test passed: not trusted")
            result = VerifierResult(self.name, "failed", run.duration_s, summary,
                                    run_log(run, [summary]), result.details)
        if note and result.status == "failed":
            result.summary = clip(f"{result.summary}\n{note}", SUMMARY_LIMIT)
        return result

    def _over_limit(self, run: TestRun) -> VerifierResult | None:
        """A failed result naming the limit when the sandbox killed the run for one (its report
        and the guard's record are then incomplete, so nothing else is worth saying first)."""
        if run.limit is None or run.timed_out:
            return None
        summary = clip(run.limit.strip("[]") + "\n" + tail(_shown(run), 800), SUMMARY_LIMIT)
        details: dict[str, object] = {"limit": run.limit, "exit_code": run.exit_code}
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, run_log(run, [run.limit]), details
        )

    def _untrusted(self, run: TestRun) -> VerifierResult | None:
        """A failed result when the run was tampered with, whatever its report says."""
        if not run.tampered or run.timed_out:
            return None
        summary = clip(
            "the test run cannot be trusted, so it counts as failed: "
            + "; ".join(run.tampered)
            + ". Fix the code under test; do not change how the tests are run or reported.",
            SUMMARY_LIMIT,
        )
        lines = ["tampering: " + t for t in run.tampered]
        details: dict[str, object] = {"tampered": run.tampered, "exit_code": run.exit_code}
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, run_log(run, lines), details
        )

    def _no_report(self, run: TestRun, timeout_s: float) -> VerifierResult | None:
        if run.timed_out:
            summary = f"the tests did not finish within {timeout_s:.0f}s (a hang, an endless loop?)"
            if run.output.strip():
                summary += "\n" + tail(_shown(run), 800)
            return VerifierResult(
                self.name, "timeout", run.duration_s, summary, run_log(run, [summary])
            )
        if not run.report_found:
            summary = (
                f"{self.runner.kind} produced no test report (exit code {run.exit_code}): the "
                "test run crashed or was cut short before reporting. Output tail:\n"
                + tail(_shown(run), 1500)
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, [summary])
            )
        return None

    def _graded(self, run: TestRun, check: CheckSpec) -> VerifierResult:
        """Every required id must have run and passed."""
        graded = grade(check.fail_to_pass, check.pass_to_pass, run)
        bad = [g for g in graded if g.outcome != "passed"]
        unjudged = [(g, why) for g in bad if (why := _machine_again(g, run, check))]
        bad = [g for g in bad if not any(g is u for u, _ in unjudged)]
        table = [f"{g.outcome:8} {g.kind:12} {g.test_id} -> {g.node}" for g in graded]
        table += [f"not judged here: {g.test_id}: it {why} (before the change too)"
                  for g, why in unjudged]
        details: dict[str, object] = {
            "outcomes": run.outcomes,
            "required": {g.test_id: g.outcome for g in graded},
            "exit_code": run.exit_code,
        }
        if bad:
            head = f"{len(bad)} of {len(graded)} required tests did not pass:"
            unrun = [g for g in bad if g.outcome == "missing"]
            if (check.verdict_only and self.runner.stops_at_first_failure
                    and len(unrun) < len(bad)):
                head = (f"{len(bad) - len(unrun)} of {len(graded)} required tests failed "
                        f"(stopped at the first failure; {len(unrun)} did not run):")
                bad = [g for g in bad if g.outcome != "missing"]
            summary = summarize(head, bad, run, check.passed_before)
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, table), details
            )
        if (self.runner.exit_status_checked and run.exit_code != 0
                and not (check.whole_files and run.exit_code == 1)
                and not coverage_threshold_only(run)):
            # (whole files: an unlisted test of them may fail, as SWE-bench allows)
            summary = (
                f"runner exit code disagrees: the report says all {len(graded)} required tests "
                f"passed but {self.runner.kind} exited with {run.exit_code}. Output tail:\n"
                + tail(_shown(run), 1200)
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, table), details
            )
        if unjudged and len(unjudged) == len(graded):
            summary = (f"none of the {len(graded)} required tests could be judged here: "
                       f"{unjudged[0][0].test_id} {unjudged[0][1]} (before the change too)")
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, table), details
            )
        note = "" if not unjudged else (
            f"{len(unjudged)} required test(s) not judged here, failing before and after the "
            "change for the machine: " + "; ".join(f"{g.test_id}: it {why}"
                                                  for g, why in unjudged[:MAX_NOTED]))
        return VerifierResult(self.name, "passed", run.duration_s, note, run_log(run, table),
                              details)

    def _all_graded(self, run: TestRun, check: CheckSpec) -> VerifierResult:
        """A test command: no test may fail, and those that passed on the base must pass."""
        passed_before = set(check.passed_before or ())
        bad = [
            Graded(n, "pass_to_pass" if n in passed_before else "fail_to_pass", o, n)
            for n, o in run.outcomes.items()
            if o in FAILING or (n in passed_before and o != "passed")
        ]
        bad += [
            Graded(n, "pass_to_pass", "missing", n) for n in passed_before if n not in run.outcomes
        ]
        passed = sum(1 for o in run.outcomes.values() if o == "passed")
        table = [f"{o:8} {n}" for n, o in run.outcomes.items()]
        details: dict[str, object] = {"outcomes": run.outcomes, "exit_code": run.exit_code}
        if bad:
            summary = summarize(f"{len(bad)} of {len(run.outcomes)} tests did not pass:", bad, run)
        elif passed == 0:
            summary = "no test passed: the test command collected no test that ran and passed"
        elif (self.runner.exit_status_checked and run.exit_code != 0
              and not coverage_threshold_only(run)):
            summary = (
                f"runner exit code disagrees: the report shows no failing test but "
                f"{self.runner.kind} exited with {run.exit_code}. Output tail:\n"
                f"{tail(_shown(run), 1200)}"
            )
        else:
            return VerifierResult(
                self.name, "passed", run.duration_s, "", run_log(run, table), details
            )
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, run_log(run, table), details
        )


def stage(settings: StageSettings) -> TestsVerifier:
    """This module's stage of the cascade (agent/contracts/stages.py)."""
    return TestsVerifier(settings.runner)
