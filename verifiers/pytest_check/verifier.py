"""The pytest stage of the cascade: runs the task's tests (node ids, or a plain pytest command)
through run.py and grades them through grade.py, so its verdict comes from pytest's own report
and the guard's record, never from the console output or an exit status alone.
"""

from __future__ import annotations

from ooda.agent.contracts.protocols import CheckSpec, Sandbox, VerifierResult, VerifierStatus
from ooda.verifiers import SUMMARY_LIMIT, clip, output_runners, tail
from ooda.verifiers.pytest_check.grade import FAILING, Graded, grade, run_log, summarize
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.pytest_check.run import (
    PreTestFailed,
    not_gradable,
    pytest_command,
    run_pytest,
    run_pytest_ids,
)

HIDDEN_READ_NOTE = (
    "note: the code under test read the task's hidden test file(s) {files} while the tests "
    "ran, so only which tests failed is said here, not how"
)


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


class PytestVerifier:
    """Runs the task's tests (node ids, or a test command) and grades them per the SPEC."""

    name = "pytest"
    after_tests = False

    def verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        try:
            return self._verify(sandbox, check)
        except PreTestFailed as exc:  # the environment's commands, not the code under test
            return VerifierResult(self.name, "error", 0.0, clip(str(exc), SUMMARY_LIMIT), str(exc))

    def _verify(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        if check.tests_optional and not (check.fail_to_pass or check.pass_to_pass
                                         or check.test_cmd):
            return VerifierResult(self.name, "skipped", 0.0, "", "no regression test applies")
        if check.runner != "pytest" and (check.fail_to_pass or check.pass_to_pass):
            return self._verify_output_runner(sandbox, check)
        if check.fail_to_pass or check.pass_to_pass:
            return self._verify_ids(sandbox, check)
        if check.test_cmd:
            parsed = pytest_command(check.test_cmd)
            if parsed is None:
                message = not_gradable(check.test_cmd)
                return VerifierResult(self.name, "error", 0.0, message, message)
            return self._verify_pytest_cmd(sandbox, check, parsed[0], parsed[1])
        message = "the task names no tests (fail_to_pass, pass_to_pass or a test command)"
        return VerifierResult(self.name, "error", 0.0, message, message)

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
                f"pytest produced no test report (exit code {run.exit_code}): the test run "
                "crashed or was cut short before reporting. Output tail:\n"
                + tail(_shown(run), 1500)
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, [summary])
            )
        return None

    def _verify_output_runner(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        """Django's runtests.py or sympy's bin/test, graded from their output (no guard)."""
        ids = list(check.fail_to_pass) + list(check.pass_to_pass)
        run = output_runners.run(sandbox, check.runner, check.runner_cmd, ids,
                                 check.test_files, check.whole_files, check.timeout_s,
                                 check.pre_test)
        early = self._over_limit(run)
        if early:
            return early
        if run.timed_out or not run.report_found:
            summary = (f"the tests did not finish within {check.timeout_s:.0f}s" if run.timed_out
                       else f"{check.runner} reported no test (exit code {run.exit_code}). "
                            f"Output tail:\n{tail(run.output, 1500)}")
            status: VerifierStatus = "timeout" if run.timed_out else "failed"
            return VerifierResult(self.name, status, run.duration_s, summary,
                                  run_log(run, [summary]))
        graded = grade(check.fail_to_pass, check.pass_to_pass, run)
        bad = [g for g in graded if g.outcome != "passed"]
        table = [f"{g.outcome:8} {g.kind:12} {g.test_id}" for g in graded]
        details: dict[str, object] = {"outcomes": run.outcomes, "exit_code": run.exit_code,
                                      "required": {g.test_id: g.outcome for g in graded}}
        if bad:
            head = f"{len(bad)} of {len(graded)} required tests did not pass:"
            summary = summarize(head, bad, run, check.passed_before)
            return VerifierResult(self.name, "failed", run.duration_s, summary,
                                  run_log(run, table), details)
        return VerifierResult(self.name, "passed", run.duration_s, "", run_log(run, table),
                              details)

    def _verify_ids(self, sandbox: Sandbox, check: CheckSpec) -> VerifierResult:
        ids = list(check.fail_to_pass) + list(check.pass_to_pass)  # the failing ones first
        # no feedback needed: stop at the first failure (not when whole files run: an unlisted
        # test failing first would hide the listed ones)
        options = ["-x"] if check.verdict_only and not check.whole_files else []
        run = run_pytest_ids(sandbox, ids, check.timeout_s, check.changed_files, options,
                             whole_files=check.whole_files, pre_test=check.pre_test,
                             hidden_files=check.test_files)
        note = _quiet(run)
        early = (
            self._over_limit(run) or self._untrusted(run) or self._no_report(run, check.timeout_s)
        )
        if early:
            return early
        graded = grade(check.fail_to_pass, check.pass_to_pass, run)
        bad = [g for g in graded if g.outcome != "passed"]
        table = [f"{g.outcome:8} {g.kind:12} {g.test_id} -> {g.node}" for g in graded]
        details: dict[str, object] = {
            "outcomes": run.outcomes,
            "required": {g.test_id: g.outcome for g in graded},
            "exit_code": run.exit_code,
        }
        if bad:
            head = f"{len(bad)} of {len(graded)} required tests did not pass:"
            unrun = [g for g in bad if g.outcome == "missing"]
            if check.verdict_only and len(unrun) < len(bad):
                head = (f"{len(bad) - len(unrun)} of {len(graded)} required tests failed "
                        f"(stopped at the first failure; {len(unrun)} did not run):")
                bad = [g for g in bad if g.outcome != "missing"]
            summary = summarize(head, bad, run, check.passed_before)
            if note:
                summary = clip(f"{summary}\n{note}", SUMMARY_LIMIT)
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, table), details
            )
        if run.exit_code != 0 and not (check.whole_files and run.exit_code == 1):
            # (whole files: an unlisted test of them may fail, as SWE-bench allows)
            summary = (
                f"runner exit code disagrees: the report says all {len(graded)} required tests "
                f"passed but pytest exited with {run.exit_code}. Output tail:\n"
                + tail(_shown(run), 1200)
            )
            return VerifierResult(
                self.name, "failed", run.duration_s, summary, run_log(run, table), details
            )
        log = run_log(run, table)
        return VerifierResult(self.name, "passed", run.duration_s, "", log, details)

    def _verify_pytest_cmd(
        self, sandbox: Sandbox, check: CheckSpec, args: list[str], env: dict[str, str]
    ) -> VerifierResult:
        run = run_pytest(sandbox, args, check.timeout_s, env=env, changed_files=check.changed_files,
                         pre_test=check.pre_test, hidden_files=check.test_files)
        note = _quiet(run)
        early = (
            self._over_limit(run) or self._untrusted(run) or self._no_report(run, check.timeout_s)
        )
        if early:
            return early
        base = check.baseline.get(self.name)
        passed_before = (
            {n for n, o in base.items() if o == "passed"} if isinstance(base, dict) else set()
        )
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
            if note:
                summary = clip(f"{summary}\n{note}", SUMMARY_LIMIT)
        elif passed == 0:
            summary = "no test passed: the test command collected no test that ran and passed"
        elif run.exit_code != 0:
            summary = (
                f"runner exit code disagrees: the report shows no failing test but pytest "
                f"exited with {run.exit_code}. Output tail:\n{tail(_shown(run), 1200)}"
            )
        else:
            return VerifierResult(
                self.name, "passed", run.duration_s, "", run_log(run, table), details
            )
        return VerifierResult(
            self.name, "failed", run.duration_s, summary, run_log(run, table), details
        )
