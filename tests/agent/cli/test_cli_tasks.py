"""`ooda tasks import` from a URL (a git repository is cloned: file:// here, offline) and the
hint of `ooda run` for a task directory named differently (issue 15.7)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DATASETS = Path(os.environ.get("OODA_DATASETS", ROOT.parent / "shared" / "datasets"))


def ooda(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OODA_", "OPENAI_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=ROOT,
                          env={**env, "OODA_DAEMON": "0"}, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not (DATASETS / "quixbugs").is_dir(), reason="QuixBugs data not present")
def test_import_from_a_git_url_then_a_misnamed_path_gets_a_hint(tmp_path: Path) -> None:
    origin = tmp_path / "QuixBugs"
    shutil.copytree(DATASETS / "quixbugs", origin)
    git = ["git", "-C", str(origin), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "data"], check=True)
    dest = tmp_path / "quixbugs"
    imported = ooda("tasks", "import", "quixbugs", origin.as_uri(), str(dest), "--only", "gcd")
    assert imported.returncode == 0, imported.stderr
    (task,) = [p for p in dest.iterdir() if p.is_dir()]
    missed = ooda("run", str(dest / "gcd"), "--model", "gold")
    assert missed.returncode == 2
    assert f"did you mean {task}?" in missed.stderr


def test_an_unreachable_url_is_an_infrastructure_error(tmp_path: Path) -> None:
    failed = ooda("tasks", "import", "quixbugs", (tmp_path / "nothing").as_uri(),
                  str(tmp_path / "out"))
    assert failed.returncode == 3 and "cannot clone" in failed.stderr
    assert len(failed.stderr.strip().splitlines()) == 1


def test_a_task_directory_takes_the_command_lines_overrides_as_a_new_task() -> None:
    """`ooda run TASK_DIR --statement ... --fail-to-pass ...`: the overridden fields change, the
    others are the task's own (Task is frozen: a new task, nothing changed in place)."""
    from ooda.agent.cli.run import _task
    from ooda.tasks.loader import load_task

    median = Path(__file__).resolve().parents[3] / "tasks" / "examples" / "median"
    own = load_task(median)
    task = _task(median, "say it again", "python -m pytest -q", ["tests/test_x.py::test_y"], None)
    assert (task.statement, task.test_cmd) == ("say it again", "python -m pytest -q")
    assert task.fail_to_pass == ["tests/test_x.py::test_y"]
    assert task.pass_to_pass == own.pass_to_pass and task.repo == own.repo
    assert _task(median, None, None, None, None) == own
    with pytest.raises(dataclasses.FrozenInstanceError):
        own.statement = "changed in place"  # type: ignore[misc]
