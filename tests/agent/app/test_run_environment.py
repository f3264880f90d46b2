"""`--environment auto|none|PATH` for `ooda run`, `ooda verify` and `ooda ci` (the plan's
environment, agent/verify/plan.py's draft_plan, as agent/app/ci/run.py makes it too): which
environment a task gets, and the line that says so; the task itself is never changed. The loop is faked here; tests/acceptance/test_detected_environment.py builds one for real."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.app.ci.outcome import CiOptions
from ooda.agent.app.ci.run import run_ci
from ooda.agent.app.run import RunOptions
from ooda.agent.contracts.errors import UsageError
from ooda.agent.contracts.options import EnvironmentOptions, SandboxOptions
from ooda.agent.core.loop import RunResult
from ooda.agent.core.records import RunSummary
from ooda.agent.core.runlog import RunLog, new_run_id
from ooda.agent.verify.plan import TaskPlan, draft_plan
from ooda.tasks import detect_environment
from ooda.tasks.loader import Task, VerifierOptions, task_from_repo

PYPROJECT = """\
[project]
name = "demo"
version = "0.1"
requires-python = "<3.10"
dependencies = ["MarkupSafe==2.0.1"]
"""
JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="pytest" tests="1" failures="1">
<testcase classname="tests.test_demo" name="test_greet" file="tests/test_demo.py">
<failure message="assert 'helo' == 'hello'">E assert</failure></testcase>
</testsuite></testsuites>
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    (root / "src" / "demo").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "src" / "demo" / "__init__.py").write_text("def greet():\n    return 'helo'\n")
    (root / "tests" / "test_demo.py").write_text("from demo import greet\n\n\ndef test_greet():"
                                                 "\n    assert greet() == 'hello'\n")
    return root


def plain(repo: Path, requirements: Path | None = None) -> Task:
    return task_from_repo(repo, statement="greet says hello", test_cmd=None,
                          fail_to_pass=["tests/test_demo.py::test_greet"], pass_to_pass=[],
                          verifiers=VerifierOptions(), requirements=requirements)


def planned(task: Task, choice: str | None, sandbox: str | None = None) -> TaskPlan:
    return draft_plan(task, EnvironmentOptions(choice), SandboxOptions(sandbox))


def test_auto_detects_and_says_why(repo: Path) -> None:
    task = plain(repo)
    plan = planned(task, "auto")
    assert plan.environment_line == ("environment: Python 3.9 (requires-python <3.10), pip "
                                     "install -e . — detected; --environment none to skip")
    assert plan.environment_table == {"python": "3.9", "apt": list(detect_environment.APT),
                                      "install": "python3 -m pip install -e .",
                                      "runner": {"packages": ["pytest"]}}
    assert plan.environment is not None and plan.environment.python == "3.9"
    assert not (plan.stages.ruff or plan.stages.mypy or plan.stages.security)
    assert task.environment is None and task.verifiers.ruff  # the task is left as it was
    table = dict(plan.environment_table or {})
    own = planned(dataclasses.replace(task, environment=table), "auto")  # now the task's own
    assert own.environment_line is None and own.environment == plan.environment


def test_auto_without_a_docker_engine_keeps_oodas_image_and_says_why(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ooda.agent.sandbox.docker.launch as launch

    monkeypatch.setattr(launch, "docker_problem", lambda: "Docker engine not answering")
    plan = planned(plain(repo), "auto", "bwrap")
    said = plan.environment_line
    assert said is not None and "needs a Docker engine" in said and "Python 3.9" in said
    assert plan.environment is None


def test_what_auto_leaves_alone(repo: Path, tmp_path: Path) -> None:
    for task, sandbox in ((plain(repo), "local"), (plain(repo), None)):
        if sandbox is None:
            reqs = tmp_path / "requirements.txt"
            reqs.write_text("attrs\n")
            task = plain(repo, reqs)  # the light path: wheels on ooda's image
        plan = planned(task, "auto", sandbox)
        assert plan.environment_line is None
        assert plan.environment is None and plan.stages.ruff
    task = plain(repo)
    plan = planned(task, None)  # ooda eval
    assert plan.environment_line is None and plan.environment is None
    plan = planned(task, "none")
    assert plan.environment_line == "environment: ooda's image (--environment none)"
    assert plan.environment is None
    task = dataclasses.replace(task, environment={"python": "3.13"})
    plan = planned(task, "none")
    assert plan.environment_line == (
        "environment: the task's own [environment] (--environment none ignored)")
    assert plan.environment_table == {"python": "3.13"}


@pytest.mark.parametrize("text", [
    '[environment]\npython = "3.13"\npip = ["attrs==23.2.0"]\n',
    '[tool.ooda.environment]\npython = "3.13"\npip = ["attrs==23.2.0"]\n',
    'python = "3.13"\npip = ["attrs==23.2.0"]\n',
])
def test_a_file_gives_the_table(repo: Path, tmp_path: Path, text: str) -> None:
    path = tmp_path / "env.toml"
    path.write_text(text)
    plan = planned(plain(repo), str(path))
    assert plan.environment_line == f"environment: from {path}"
    assert plan.environment_table == {"python": "3.13", "pip": ["attrs==23.2.0"]}


def test_bad_values_are_one_line_usage_errors(repo: Path, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"--environment 'autp': give auto, none, or a TOML"):
        RunOptions.of(model="m", environment="autp").checked()
    path = tmp_path / "env.toml"
    for text, error in (('python = "3.9"\npipp = ["x"]\n', "unknown key.*pipp"),
                        ("python = [", "cannot read it as TOML"),
                        ('python = "2.7"\n', "no Debian release serves Python 2.7")):
        path.write_text(text)
        with pytest.raises(UsageError, match=error) as caught:
            planned(plain(repo), str(path))
        assert "\n" not in str(caught.value)


class FakeRunTask:
    """Stands in for run_task: records the task and the options it was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[Task, RunOptions, TaskPlan]] = []

    def __call__(self, task: Task, options: RunOptions, **kwargs: Any) -> tuple[RunResult, RunLog]:
        self.calls.append((task, options, kwargs["plan"]))
        log = RunLog(options.runs_dir, new_run_id(task.id))
        summary = RunSummary(log.run_id, task.id, "failed", "rounds exhausted")
        return RunResult("failed", "rounds exhausted", None, [], 1, summary), log


class NoBackend:
    name = "none"
    reusable = False

    def close(self) -> None:
        pass


def test_ci_detects_the_environment_once(repo: Path, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    junit = tmp_path / "report.xml"
    junit.write_text(JUNIT)
    fake = FakeRunTask()
    said: list[str] = []

    class Console:
        def print(self, text: str, **kwargs: Any) -> None:
            said.append(text)

    run_ci(CiOptions(repo=repo, junit=[junit], out=tmp_path / "out"),
           RunOptions.of(model="m", runs_dir=tmp_path / "runs", environment="auto"),
           console=Console(),  # type: ignore[arg-type]
           run_task_fn=fake, backend=NoBackend())  # type: ignore[arg-type]
    [(task, options, plan)] = fake.calls
    assert plan.environment is not None and plan.environment.python == "3.9"
    assert plan.task is task and task.environment is None  # the plan holds it, not the task
    assert [s for s in said if s.startswith("environment:")] == [
        "environment: Python 3.9 (requires-python <3.10), pip install -e . — detected; "
        "--environment none to skip"]
