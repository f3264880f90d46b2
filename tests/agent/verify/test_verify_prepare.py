"""The plan of a task with only a test command (agent/verify/prepare.py's make_plan): its
fail_to_pass/pass_to_pass come from a run on the base, and the verifier judges by them; and
support/git.py, the git runner that applies patches, isolated from the caller's git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.support.git import first_line, git
from ooda.agent.verify.prepare import make_plan
from ooda.agent.verify.verifier import TaskVerifier
from ooda.tasks.loader import Task, VerifierOptions

TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\n" \
        "def test_zero():\n    assert add(0, 0) == 0\n"


def make_task(tmp_path: Path, body: str, test_cmd: str) -> Task:
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "calc.py").write_text(f"def add(a, b):\n    return {body}\n")
    (repo / "tests" / "test_calc.py").write_text(TESTS)
    return Task(id="calc", statement="add", repo=repo, test_cmd=test_cmd,
                verifiers=VerifierOptions(ruff=False, mypy=False, timeout_s=60))


def prepared(task: Task, tmp_path: Path) -> tuple[Task, Task]:
    plan, verifier = make_plan(task, lambda p: TaskVerifier(p, LocalBackend(), tmp_path / "work"))
    try:
        return plan.judged_task(), verifier.task
    finally:
        verifier.close()


def test_prepare_derives_the_test_lists_and_keeps_them(tmp_path: Path) -> None:
    derived, kept = prepared(make_task(tmp_path, "a - b", "pytest tests"), tmp_path)
    assert kept == derived
    assert derived.fail_to_pass == ["tests/test_calc.py::test_add"]
    assert derived.pass_to_pass == ["tests/test_calc.py::test_zero"]


def test_prepare_refuses_a_command_whose_tests_all_pass(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="passes on the unpatched code"):
        prepared(make_task(tmp_path, "a + b", "pytest tests"), tmp_path)


def test_prepare_refuses_a_command_it_cannot_grade_per_test(tmp_path: Path) -> None:
    # (task.toml and the command line refuse such a command at load; made by hand here)
    task = make_task(tmp_path, "a - b", "pytest tests && true")
    with pytest.raises(UsageError, match="does not run on the unpatched code"):
        prepared(task, tmp_path)


def test_git_isolated_sees_no_repository_around_it(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    inner = tmp_path / "inner"
    inner.mkdir()
    assert git(inner, "rev-parse", "--git-dir").returncode == 0
    alone = git(inner, "rev-parse", "--git-dir", isolated=True)
    assert alone.returncode != 0
    assert "not a git repository" in first_line(alone.stderr)
    assert first_line(b"\n\n", "none") == "none"
