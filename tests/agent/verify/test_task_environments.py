"""A task with its own [environment], verified end to end with real Docker: the environment is
built once per hash (shared with tests/agent/sandbox/test_environments.py's demo: same spec,
same install files, so usually already built), every candidate's sandbox opens on it, the
repository's own pytest (7.4.4 on Python 3.9) runs under ooda's guard with the plugin the task
names loaded by `-p`, the src layout imports through the editable install, and a failed build
is one line, built once."""

from __future__ import annotations

import difflib
import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.contracts.errors import UsageError
from ooda.agent.sandbox.environments.builder import EnvBuildError
from ooda.tasks.loader import load_task
from tests.helpers.env_demo import DEMO_PYPROJECT as PYPROJECT
from tests.helpers.sandbox_helpers import backend_or_skip

BUGGY = 'def greet():\n    return "helo"\n'
FIXED = 'def greet():\n    return "hello"\n'
TESTS = """\
import sys

import markupsafe
import pytest

from demo import greet


def test_greet(mocker):
    assert greet() == "hello"


def test_env(mocker):
    assert sys.version_info[:2] == (3, 9)
    assert pytest.__version__ == "PYTEST_VERSION"
    assert markupsafe.__version__ == "2.0.1"


@pytest.mark.parametrize("text", ['say "hi"'])
def test_quoted(text):
    assert text.startswith("say")
"""
ENVIRONMENT = """\
[environment]
python = "3.9"
apt = ["python3-tk", "python3-venv", "git"]
install = "python3 -m pip install -e ."

[environment.runner]
packages = ["pytest==PYTEST_VERSION", "pytest-mock==MOCK_VERSION"]
"""
"""No `plugins`: pytest-mock is found among the image's installed plugins and loaded with -p.
`apt` as environment detection writes it, so tests/acceptance/test_detected_environment.py's
detected table names the same image."""
RUNNERS = {"7.4.4": "3.12.0", "4.6.11": "2.0.0"}
"""pytest 7.4.4 (pluggy 1.x: the guard's new-style wrappers) and 4.6.11 (pluggy 0.13: its
LegacyGuard; no pytest_assertion_pass hook; JUnit names as XML-escaped py.xml objects), each
with a pytest-mock of its time."""


def _patch(old: str, new: str, path: str = "src/demo/__init__.py") -> str:
    body = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                        f"a/{path}", f"b/{path}"))
    return f"diff --git a/{path} b/{path}\n{body}"


def _task_dir(root: Path, environment: str = ENVIRONMENT, pytest_version: str = "7.4.4") -> Path:
    environment = environment.replace("PYTEST_VERSION", pytest_version)
    environment = environment.replace("MOCK_VERSION", RUNNERS[pytest_version])
    task = root / "task"
    repo = task / "repo"
    (repo / "src" / "demo").mkdir(parents=True)
    (repo / "tests").mkdir()
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "src" / "demo" / "__init__.py").write_text(BUGGY)
    (repo / "tests" / "test_demo.py").write_text(TESTS.replace("PYTEST_VERSION", pytest_version))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t",
                    "commit", "-qm", "demo"], check=True)
    (task / "task.toml").write_text(
        'statement = "greet() says hello"\n'
        'fail_to_pass = ["tests/test_demo.py::test_greet"]\n'
        'pass_to_pass = ["tests/test_demo.py::test_env", \'tests/test_demo.py::test_quoted[say "hi"]\']\n'
        + environment)
    return task


def test_an_environment_table_is_checked_at_load(tmp_path: Path) -> None:
    task = load_task(_task_dir(tmp_path / "a"))
    assert task.environment is not None and task.environment["python"] == "3.9"
    assert not (task.verifiers.ruff or task.verifiers.mypy or task.verifiers.security)
    with pytest.raises(UsageError, match="unknown test runner 'nose'"):
        load_task(_task_dir(tmp_path / "b", '[environment]\nrunner = {kind = "nose"}\n'))
    django = load_task(_task_dir(tmp_path / "c", '[environment]\nrunner = {kind = "django"}\n'))
    assert django.environment is not None


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.parametrize("pytest_version", sorted(RUNNERS, reverse=True))
def test_a_task_runs_in_its_own_environment(
    docker: Any, tmp_path: Path, pytest_version: str
) -> None:
    from ooda.agent.verify.verifier import TaskVerifier

    task = load_task(_task_dir(tmp_path, pytest_version=pytest_version))
    verifier = TaskVerifier(task, docker, tmp_path / "work", concurrency=2)
    try:
        assert verifier.environment is not None
        built = verifier.environment.built
        assert built.release == "bullseye"
        assert "pytest_mock" in built.plugins  # found installed, not named in [environment]
        labels = docker.client.api.inspect_image(built.tag)["Config"]["Labels"]
        assert labels["ooda.env"] == built.spec_hash and not labels["ooda.owner_pid"]
        # the build's overlay (egg-info of the editable install) is in the trusted base
        assert any(p.name.endswith(".egg-info") for p in (verifier.base_repo / "src").iterdir())
        good = verifier.verify(_patch(BUGGY, FIXED))  # its tests need pytest_mock's `mocker`
        assert good.status == "passed", good.feedback
        bad = verifier.verify(_patch(BUGGY, 'def greet():\n    return "bye"\n'))
        assert bad.status == "failed" and "test_greet" in bad.feedback
        outcomes = verifier.run_base_tests()
        assert outcomes == {"tests/test_demo.py::test_greet": "failed",
                            "tests/test_demo.py::test_env": "passed",
                            'tests/test_demo.py::test_quoted[say "hi"]': "passed"}
        assert verifier.pool.started <= 2  # one environment, one pool: no build per slot
    finally:
        verifier.close()


@pytest.mark.docker
@pytest.mark.slow
def test_a_failed_environment_is_one_line_built_once(docker: Any, tmp_path: Path) -> None:
    from ooda.agent.verify.verifier import TaskVerifier

    broken = ('[environment]\npython = "3.9"\ninstall = ""\npip = ["MarkupSafe==0.0.999"]\n'
              f'build_env = {{OODA_TEST_RUN = "{uuid.uuid4().hex}"}}\n')
    task = load_task(_task_dir(tmp_path, broken))
    with pytest.raises(EnvBuildError) as first:
        TaskVerifier(task, docker, tmp_path / "w1")
    assert first.value.cause == "No matching distribution found for MarkupSafe==0.0.999"
    assert "\n" not in str(first.value)
    log = first.value.log_path
    stamp = log.stat().st_mtime_ns
    with pytest.raises(EnvBuildError, match="MarkupSafe==0.0.999"):
        TaskVerifier(task, docker, tmp_path / "w2")  # recorded: not built again
    assert log.stat().st_mtime_ns == stamp
    with pytest.raises(EnvBuildError, match="MarkupSafe==0.0.999"):  # --retry-errors
        TaskVerifier(task, docker, tmp_path / "w3", retry_failed_environment=True)
    assert log.stat().st_mtime_ns != stamp


ORDERED = """\
import pytest

from demo import greet

STATE = []


def test_setup_state():
    STATE.append(greet())


def test_depends_on_the_earlier_unlisted_test():
    assert STATE == ["hello"]


@pytest.mark.parametrize("name", ["cliapp.factory-create_app", "cliapp.factory-no_app"])
def test_locate_app(name):
    assert greet() == "hello"


def test_unlisted_and_failing():
    assert False
"""


@pytest.mark.docker
@pytest.mark.slow
def test_swebench_style_ids_whole_files_and_truncated_ids(docker: Any, tmp_path: Path) -> None:
    """Test files run whole (a listed test depends on an earlier unlisted one), a truncated
    parametrized id grades every parametrization it begins, an unlisted failing test of the
    file does not count, and no id makes collection fail for the others."""
    from ooda.agent.verify.verifier import TaskVerifier

    root = _task_dir(tmp_path)
    (root / "repo" / "tests" / "test_ordered.py").write_text(ORDERED)
    toml = (root / "task.toml").read_text().replace(
        'fail_to_pass = ["tests/test_demo.py::test_greet"]',
        'run_test_files = true\nfail_to_pass = ["tests/test_demo.py::test_greet", '
        '"tests/test_ordered.py::test_depends_on_the_earlier_unlisted_test", '
        '"tests/test_ordered.py::test_locate_app[cliapp.factory-"]')
    (root / "task.toml").write_text(toml)
    task = load_task(root)
    verifier = TaskVerifier(task, docker, tmp_path / "work", concurrency=1)
    try:
        good = verifier.verify(_patch(BUGGY, FIXED), verdict_only=True)
        assert good.status == "passed", good.feedback
        bad = verifier.verify(_patch(BUGGY, 'def greet():\n    return "bye"\n'))
        assert bad.status == "failed"
        assert "test_locate_app[cliapp.factory-" in bad.feedback
        assert "test_depends_on_the_earlier_unlisted_test" in bad.feedback
    finally:
        verifier.close()


def _with_gold(root: Path) -> Path:
    (root / "gold.diff").write_text(_patch(BUGGY, FIXED))
    toml = (root / "task.toml").read_text()
    (root / "task.toml").write_text(toml.replace("[environment]",
                                                 'gold_patch = "gold.diff"\n\n[environment]', 1))
    return root


@pytest.mark.docker
@pytest.mark.slow
def test_gold_is_verified_once_in_its_environment_and_a_broken_one_exits_3(
    docker: Any, tmp_path: Path
) -> None:
    """`ooda run --model gold -n 4 --rounds 3`: one candidate, one verification (not n x
    rounds copies); a task whose environment cannot be built: exit 3 and the cause in one
    line on the console."""
    import json
    import sys

    root = _with_gold(_task_dir(tmp_path / "ok"))
    env = {**os.environ, "OODA_DAEMON": "0"}
    cmd = [sys.executable, "-m", "ooda.agent.cli", "run", "--model", "gold", "--sandbox", "docker",
           "-n", "4", "--rounds", "3", "--runs-dir", str(tmp_path / "runs")]
    done = subprocess.run([*cmd, str(root)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    attempts = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len(attempts) == 1 and attempts[0]["status"] == "passed"
    assert "fail_to_pass_passing_before" not in json.loads((run_dir / "run.json").read_text())

    # a FAIL_TO_PASS test that passes before the change is said and recorded
    toml = root / "task.toml"
    toml.write_text(toml.read_text().replace(
        'fail_to_pass = ["tests/test_demo.py::test_greet"]',
        'fail_to_pass = ["tests/test_demo.py::test_greet", "tests/test_demo.py::test_env"]'))
    runs2 = tmp_path / "runs2"
    done = subprocess.run([*cmd[:-1], str(runs2), str(root)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tests/test_demo.py::test_env pass(es) on the unpatched code" in done.stdout + done.stderr
    (run_dir,) = (p for p in runs2.iterdir() if p.is_dir())
    run_json = json.loads((run_dir / "run.json").read_text())
    assert run_json["fail_to_pass_passing_before"] == ["tests/test_demo.py::test_env"]

    broken = ('[environment]\npython = "3.9"\ninstall = ""\npip = ["MarkupSafe==0.0.997"]\n'
              f'build_env = {{OODA_TEST_RUN = "{uuid.uuid4().hex}"}}\n')
    bad = _with_gold(_task_dir(tmp_path / "bad", broken))
    done = subprocess.run([*cmd, str(bad)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 3, done.stderr
    lines = [line for line in done.stderr.splitlines() if "could not be built" in line]
    assert len(lines) == 1 and "No matching distribution found for MarkupSafe==0.0.997" in lines[0]


@pytest.mark.docker
@pytest.mark.slow
def test_tasks_validate_tells_a_broken_environment_from_a_wrong_task(
    docker: Any, tmp_path: Path
) -> None:
    """`ooda tasks validate DIR`: base and gold in each task's environment; a broken
    environment is counted apart from a task whose lists or gold patch are wrong."""
    import sys

    tasks = tmp_path / "tasks"
    _with_gold(_task_dir(tasks / "good"))
    broken = ('[environment]\npython = "3.9"\ninstall = ""\npip = ["MarkupSafe==0.0.996"]\n'
              f'build_env = {{OODA_TEST_RUN = "{uuid.uuid4().hex}"}}\n')
    _task_dir(tasks / "broken", broken)
    wrong = _task_dir(tasks / "wrong")  # its FAIL_TO_PASS test passes already
    toml = (wrong / "task.toml").read_text().replace("test_greet", "test_env", 1)
    (wrong / "task.toml").write_text(toml.replace('pass_to_pass = ["tests/test_demo.py::test_env"]',
                                                  "pass_to_pass = []"))
    for name in ("good", "broken", "wrong"):  # the task directories' ids
        (tasks / name / "task").rename(tasks / f"{name}-task")
        (tasks / name).rmdir()
    done = subprocess.run(
        [sys.executable, "-m", "ooda.agent.cli", "tasks", "validate", str(tasks),
         "--sandbox", "docker"],
        capture_output=True, text=True, env={**os.environ, "OODA_DAEMON": "0"}, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("VALID") and "good-task" in line for line in lines), lines
    assert any(line.startswith("ENVIRONMENT") and "broken-task" in line
               and "MarkupSafe==0.0.996" in line for line in lines), lines
    assert any(line.startswith("BASE") and "wrong-task" in line and "passes already" in line
               for line in lines), lines
    assert lines[-1].startswith("1 of 3 valid; broken environment: 1; base lists wrong: 1;")
    assert lines[-1].endswith("FAIL_TO_PASS passing before any change in 1")


@pytest.mark.docker
@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="exporting a root filesystem needs root")
def test_bwrap_runs_a_task_in_the_same_environment(docker: Any, tmp_path: Path) -> None:
    """The bwrap backend opens its sandboxes on the environment image's filesystem."""
    from ooda.agent.verify.verifier import TaskVerifier

    bwrap = backend_or_skip("bwrap")
    task = load_task(_task_dir(tmp_path))
    verifier = TaskVerifier(task, bwrap, tmp_path / "work", concurrency=1)
    try:
        assert verifier.environment is not None and verifier.environment.rootfs is not None
        good = verifier.verify(_patch(BUGGY, FIXED))  # pytest 7.4.4 on 3.9 with pytest_mock
        assert good.status == "passed", good.feedback
        bad = verifier.verify(_patch(BUGGY, 'def greet():\n    return "bye"\n'))
        assert bad.status == "failed" and "test_greet" in bad.feedback
    finally:
        verifier.close()
        bwrap.close()
