"""`ooda run` on a plain repository that needs its own environment, from the outside: the real
CLI, real HTTP to the bundled endpoint, real Docker. The repository (src layout, one pinned
dependency, Python <3.10, its pytest pinned in tox.ini) has no task.toml: ooda detects its
environment, builds it (the same spec and install files as
tests/agent/verify/test_task_environments.py's demo, so one image serves both) and verifies
the candidate in it; `--environment none` keeps ooda's image, where the tests cannot even be imported for want of
the dependency: exit 2 before the model is asked anything, naming the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from env_demo import DEMO_PYPROJECT as PYPROJECT
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

TOX = """\
[tox]
envlist = py39

[testenv]
deps =
    pytest==7.4.4
    pytest-mock==3.12.0
commands = pytest {posargs}
"""
TESTS = """\
import sys

import markupsafe
import pytest

from demo import greet


def test_greet(mocker):
    assert greet() == "hello"


def test_env():
    assert sys.version_info[:2] == (3, 9)
    assert (pytest.__version__, markupsafe.__version__) == ("7.4.4", "2.0.1")
"""
FIX = ('src/demo/__init__.py\n<<<<<<< SEARCH\n    return "helo"\n=======\n'
       '    return "hello"\n>>>>>>> REPLACE\n')
DETECTED = ("environment: Python 3.9 (requires-python >=3.9,<3.10, tox envlist 3.9), "
            "pip install -e ., pytest==7.4.4 pytest-mock==3.12.0 — detected; "
            "--environment none to skip")


def ooda(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    if "OODA_HOME" in os.environ:
        env["OODA_HOME"] = os.environ["OODA_HOME"]
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=cwd,
                          env={**env, "OODA_DAEMON": "0"}, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "demo"
    (root / "src" / "demo").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "pyproject.toml").write_text(PYPROJECT)
    (root / "tox.ini").write_text(TOX)
    (root / "src" / "demo" / "__init__.py").write_text('def greet():\n    return "helo"\n')
    (root / "tests" / "test_demo.py").write_text(TESTS)
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=root, check=True)
    subprocess.run([*git, "add", "-A"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=root, check=True)
    return root


@pytest.mark.slow
def test_a_plain_repository_runs_in_its_detected_environment(repo: Path, tmp_path: Path) -> None:
    backend_or_skip("docker")
    replay = tmp_path / "demo.jsonl"
    replay.write_text(json.dumps({"task": "demo", "answer": FIX}) + "\n")
    args = ["run", ".", "--statement", "greet() should say hello",
            "--fail-to-pass", "tests/test_demo.py::test_greet",
            "--pass-to-pass", "tests/test_demo.py::test_env", "-n", "1", "--rounds", "1"]
    with ReplayServer([replay]) as server:
        base_url = server.start()
        done = ooda(*args, "--model", "m", "--base-url", base_url,
                    "--runs-dir", str(tmp_path / "runs"), cwd=repo)
        assert done.returncode == 0, done.stdout + done.stderr
        assert DETECTED in done.stderr  # the console (progress, results) is stderr
        assert "PASSED demo" in done.stderr
        [run] = [p for p in (tmp_path / "runs").iterdir() if not p.name.startswith(".")]
        summary = json.loads((run / "run.json").read_text())
        assert summary["status"] == "passed" and summary["winner"] == "r1c1"
        assert summary["environment"] == DETECTED  # run.json keeps what the tests ran in

        plain = ooda(*args, "--model", "m", "--base-url", base_url, "--environment", "none",
                     "--runs-dir", str(tmp_path / "runs-none"), cwd=repo)
    assert plain.returncode == 2, plain.stderr  # its tests cannot run there: not a bug to fix
    assert plain.stderr.startswith("environment: ooda's image (--environment none)\n")
    assert "No module named 'markupsafe'" in plain.stderr
