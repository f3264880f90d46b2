"""The facts about the unpatched code (agent/verify/base.py), on a real pytest run in a local
sandbox: a test file that cannot be imported because the environment lacks a package stops
the plan (one line naming the module and what to do); one that cannot import what the fix is
to add is a failing test like any other."""

from __future__ import annotations

from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.verify.plan import TaskPlan
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions


def make_task(tmp_path: Path, header: str, statement: str = "add adds",
              **lists: list[str]) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (repo / "tests" / "test_calc.py").write_text(
        f"{header}\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    (repo / "tests" / "test_other.py").write_text("def test_zero():\n    assert 0 == 0\n")
    return Task(id="calc", statement=statement, repo=repo,
                verifiers=VerifierOptions(ruff=False, mypy=False, timeout_s=60),
                test_cmd=None if lists else "pytest tests", **lists)


def plan_of(task: Task, tmp_path: Path, check: bool = True) -> TaskPlan:
    plan, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "work"),
                               check=check)
    verifier.close()
    return plan


@pytest.mark.parametrize("lists", [
    {},  # a test command: the import error would have become a test "to fix"
    {"fail_to_pass": ["tests/test_calc.py::test_add"],
     "pass_to_pass": ["tests/test_other.py::test_zero"]},
])
def test_a_package_the_environment_lacks_stops_the_plan(
        tmp_path: Path, lists: dict[str, list[str]]) -> None:
    task = make_task(tmp_path, "import attrs_not_installed_here", **lists)
    with pytest.raises(UsageError) as caught:
        plan_of(task, tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "tests/test_calc.py" in message
    assert "'attrs_not_installed_here'" in message and "--environment auto" in message
    facts = plan_of(task, tmp_path, check=False).base
    assert facts is not None
    [missing] = facts.missing_modules
    assert missing.missing_module == "attrs_not_installed_here"
    assert "ModuleNotFoundError" in missing.reason


def test_a_module_the_fix_is_to_add_is_a_failing_test(tmp_path: Path) -> None:
    own = make_task(tmp_path / "own", "from calc import mul  # the fix adds it")
    plan = plan_of(own, tmp_path / "own")
    assert plan.tests.fail_to_pass == ("tests/test_calc.py",)
    named = make_task(tmp_path / "named", "import geometry", statement="write geometry.py")
    facts = plan_of(named, tmp_path / "named").base
    assert facts is not None and facts.uncollectable and not facts.missing_modules
