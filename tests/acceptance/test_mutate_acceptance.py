"""`ooda run --model mutate` from the outside: the real CLI, the real Docker sandbox, no network
and no key. The median example is repaired by a mutant; a bug no mutant fixes ends cleanly with
the closest candidate and what it still fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _docker() -> None:
    backend_or_skip("docker")


def ooda(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def test_mutate_repairs_the_median_example(median: Path, tmp_path: Path) -> None:
    before = (median / "repo" / "median.py").read_text()
    proc = ooda("run", str(median), "--model", "mutate", "--time-budget", "150",
                "--runs-dir", str(tmp_path / "runs"), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "passed" and summary["model"] == "mutate"
    assert summary["tokens"]["prompt"] == 0 == summary["tokens"]["completion"]
    run_dir = tmp_path / "runs" / summary["run_id"]
    final = (run_dir / "final.diff").read_text()
    assert "ordered[middle - 1]" in final and final.count("\n+ ") + final.count("\n+\t") <= 1
    answer = (run_dir / "attempts" / summary["winner"] / "answer.md").read_text()
    assert "median.py:14" in answer and "suspiciousness" in answer
    assert (median / "repo" / "median.py").read_text() == before  # nothing applied unasked


def test_a_bug_no_mutant_fixes_ends_with_the_closest_candidate(tmp_path: Path) -> None:
    """A one-line function with two mutants and no pairs (`return s`, the statement deleted),
    so the run ends in one round because the source has nothing left, long before its budget,
    however slow the machine (the budget is only a bound: on a loaded machine the 40 s once
    given let no candidate be judged)."""
    task = tmp_path / "shout"
    (task / "repo" / "tests").mkdir(parents=True)
    (task / "repo" / "shout.py").write_text("def shout(s):\n    return s.lower()\n")
    (task / "repo" / "tests" / "test_shout.py").write_text(
        "from shout import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n")
    (task / "repo" / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (task / "task.toml").write_text(
        'id = "shout"\nstatement = "shout the text"\nrepo = "repo"\n'
        'fail_to_pass = ["tests/test_shout.py::test_shout"]\n')
    proc = ooda("run", str(task), "--model", "mutate", "--time-budget", "600",
                "--runs-dir", str(tmp_path / "runs"), timeout=900)
    assert proc.returncode == 1, proc.stderr
    assert "FAILED" in proc.stderr and "closest candidate: " in proc.stderr
    assert "still failing: " in proc.stderr and "Traceback" not in proc.stderr
    run_json = next((tmp_path / "runs").glob("*/run.json"))
    summary = json.loads(run_json.read_text())
    assert summary["status"] == "failed" and summary["closest"]
    assert summary["reason"] == "budget" or summary["reason"].startswith(
        "the source has no more candidates (")
    assert (run_json.parent / "attempts" / summary["closest"] / "patch.diff").is_file()
