"""What the base check settles beyond the facts (agent/verify/base.py; issue 34), on real pytest
runs in a local sandbox: the candidates' limit from the unpatched run when none was set, an
unpatched run that does not finish (exit 2, the option named), tests failing for the
machine's reason set apart and said, pass_to_pass ids skipped on the base set apart, and the
one line that says all of it; then the tests stage: a required test failing again for the
machine's same reason is not the candidate's failure, a reason the candidate alone produced
is; and a coverage threshold of the repository's addopts is no verdict on the tests run."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import StageOptions
from ooda.agent.contracts.protocols import CheckSpec
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify.base import plan_line
from ooda.agent.verify.plan import TaskPlan, base_limit_s, candidate_limit_s, draft_plan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions
from ooda.verifiers.environmental import environmental_reason
from ooda.verifiers.pytest_check.grade import Graded
from ooda.verifiers.pytest_check.parse import TestRun
from ooda.verifiers.tests_stage import _machine_again, coverage_threshold_only

TESTS = '''\
import locale, socket, time
import pytest
from calc import add


def test_add():
    assert add(2, 3) == 5


def test_zero():
    time.sleep(0.5)


def test_network():
    raise OSError("[Errno -3] Temporary failure in name resolution")


def test_locale():
    locale.setlocale(locale.LC_ALL, "xx_XX.UTF-8")


def test_optional():
    pytest.importorskip("no_such_module_here")
'''


def make_task(tmp_path: Path, timeout_s: float | None = None, **lists: list[str]) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    return Task(id="calc", statement="add adds", repo=repo,
                verifiers=VerifierOptions(ruff=False, mypy=False, security=False,
                                          timeout_s=timeout_s),
                test_cmd=None if lists else "pytest tests", **lists)


def plan_of(task: Task, tmp_path: Path) -> TaskPlan:
    plan, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "w"))
    verifier.close()
    return plan


def test_a_test_command_s_plan_sets_the_machine_s_failures_apart(tmp_path: Path) -> None:
    plan = plan_of(make_task(tmp_path), tmp_path)
    assert plan.tests.fail_to_pass == ("tests/test_calc.py::test_add",)
    assert plan.tests.pass_to_pass == ("tests/test_calc.py::test_zero",)
    assert plan.tests.set_apart == {
        "tests/test_calc.py::test_locale": "fails on the unpatched code: the sandbox lacks a "
                                           "locale",
        "tests/test_calc.py::test_network": "fails on the unpatched code: the sandbox needs the "
                                            "network"}
    assert not plan.stages.timeout_given and plan.base is not None
    assert plan.stages.timeout_s == candidate_limit_s(plan.base.duration_s) == 60.0
    line = plan_line(plan)
    assert line is not None and "\n" not in line
    assert line.startswith("must pass: 1 test(s) failing on the unpatched code "
                           "(tests/test_calc.py::test_add); 1 passing must keep passing; "
                           "set apart, fails on the unpatched code: the sandbox lacks a locale: "
                           "tests/test_calc.py::test_locale; ")
    assert line.endswith(f"60 s per run (from the unpatched run's {plan.base.duration_s:.0f} s)")


def test_the_limit_s_floor_and_factor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert candidate_limit_s(2.0) == 60.0 and candidate_limit_s(138.0) == 414.0
    monkeypatch.setenv("OODA_TIMEOUT_FLOOR", "1")
    monkeypatch.setenv("OODA_TIMEOUT_FACTOR", "2")
    assert candidate_limit_s(0.2) == 1.0 and candidate_limit_s(3.2) == 7.0
    monkeypatch.setenv("OODA_TIMEOUT_FACTOR", "zero")
    with pytest.raises(UsageError, match="OODA_TIMEOUT_FACTOR='zero'"):
        candidate_limit_s(1.0)


def test_the_unpatched_run_ends_within_the_task_s_time_budget(tmp_path: Path) -> None:
    """--time-budget is the whole task's (ooda run, eval, ci): an unpatched run no limit was
    set for gets the budget when it is under base_limit_s(); a limit set stays as set."""
    task = make_task(tmp_path)
    assert draft_plan(task).stages.base_run_timeout_s == base_limit_s()
    assert draft_plan(task, time_budget_s=120).stages.base_run_timeout_s == 120.0
    assert draft_plan(task, time_budget_s=1e6).stages.base_run_timeout_s == base_limit_s()
    given = draft_plan(task, stages=StageOptions(verifier_timeout=900), time_budget_s=120)
    assert given.stages.timeout_given and given.stages.base_run_timeout_s == 900.0


def test_an_unpatched_run_that_does_not_finish_stops_naming_the_option(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OODA_BASE_TIMEOUT", "0.2")
    with pytest.raises(UsageError) as caught:  # a test command's
        plan_of(make_task(tmp_path / "a"), tmp_path / "a")
    assert "did not finish within" in str(caught.value)
    assert "give it more time (--verifier-timeout SECONDS; now 0.2)" in str(caught.value)
    with pytest.raises(UsageError) as caught:  # given ids, no limit set
        plan_of(make_task(tmp_path / "c", fail_to_pass=["tests/test_calc.py::test_add"]),
                tmp_path / "c")
    assert str(caught.value).startswith(
        "the tests did not finish on the unpatched code within 0.2 s: give them longer with "
        "--verifier-timeout SECONDS (OODA_VERIFIER_TIMEOUT; a task's [verifiers] timeout_s)")
    # a task's own limit with its ids: the bug may be the loop, the run goes on
    task = make_task(tmp_path / "b", timeout_s=0.2, fail_to_pass=["tests/test_calc.py::test_add"])
    plan = plan_of(task, tmp_path / "b")
    assert plan.base is not None and plan.base.timed_out and plan.stages.timeout_s == 0.2


def test_pass_to_pass_ids_skipped_before_are_set_apart(tmp_path: Path) -> None:
    task = make_task(tmp_path, fail_to_pass=["tests/test_calc.py::test_add"],
                     pass_to_pass=["tests/test_calc.py::test_optional",
                                   "tests/test_calc.py::test_zero"])
    plan = plan_of(task, tmp_path)
    assert plan.tests.pass_to_pass == ("tests/test_calc.py::test_zero",)
    assert plan.tests.set_apart == {"tests/test_calc.py::test_optional":
                                    "skipped on the unpatched code"}
    assert plan.base is not None
    assert "tests/test_calc.py::test_network" not in plan.base.environmental  # not run


def test_environmental_reasons() -> None:
    assert environmental_reason("E   socket.gaierror: [Errno -2] Name or service not known") \
        == "needs the network"
    assert environmental_reason("E   locale.Error: unsupported locale setting") == \
        "lacks a locale"
    assert environmental_reason(
        "subprocess.py:1901: in _execute_child\nE   FileNotFoundError: [Errno 2] No such file "
        "or directory: 'git'") == "lacks a program"
    assert environmental_reason("E   FileNotFoundError: [Errno 2] No such file or directory: "
                                "'data.txt'") is None  # a file the code may have to write
    assert environmental_reason("E   ConnectionRefusedError: [Errno 111]") is None
    assert environmental_reason("E   assert 1 == 2") is None


def test_a_required_test_failing_again_for_the_machine_is_not_the_candidate_s() -> None:
    run = TestRun(messages={"t.py::net": "E   socket.gaierror: Temporary failure in name "
                                         "resolution",
                            "t.py::other": "E   assert 1 == 2"})
    check = CheckSpec(changed_files=[], unjudgeable={"t.py::net": "needs the network",
                                                     "t.py::other": "needs the network"})
    assert _machine_again(Graded("t.py::net", "fail_to_pass", "failed", "t.py::net"), run,
                          check) == "needs the network"
    # the same test failing for a reason of the candidate's code counts
    assert _machine_again(Graded("t.py::other", "fail_to_pass", "failed", "t.py::other"), run,
                          check) is None
    # a network failure the base did not have is the candidate's
    assert _machine_again(Graded("t.py::net", "fail_to_pass", "failed", "t.py::net"), run,
                          CheckSpec(changed_files=[])) is None


def test_a_coverage_threshold_is_no_verdict_on_the_tests() -> None:
    run = TestRun(exit_code=1, pytest_exit_code=1,
                  output="FAIL Required test coverage of 100% not reached. Total coverage: 80%\n")
    assert coverage_threshold_only(run)
    assert not coverage_threshold_only(TestRun(exit_code=1, pytest_exit_code=1, output="x"))
    assert not coverage_threshold_only(TestRun(exit_code=2, pytest_exit_code=2,
                                               output=run.output))
