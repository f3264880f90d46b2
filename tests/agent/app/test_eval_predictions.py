"""`ooda eval TASKSET --predictions FILE`: another system's predictions judged as the
SWE-bench harness judges them (reading the file, the report formats; then end to end through
the command line in a real sandbox on a SWE-bench .jsonl built from a tiny local repository)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ooda.agent.app.evaluate.harness_report import instance_report, run_report
from ooda.agent.app.evaluate.predictions import read_predictions
from ooda.agent.contracts.errors import UsageError

FIX = ("diff --git a/calc.py b/calc.py\n--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n"
       " def add(a: int, b: int) -> int:\n-    return a - b\n+    return a + b")
"""The fix, without its final newline (as most of one real system's predictions are)."""
FUZZY = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n-    return a - b\n"
         "+    return a + b\n")
"""Its context line differs from the file: only patch --fuzz applies it."""
CONFIG = FIX + "\n" + ("--- a/pytest.ini\n+++ b/pytest.ini\n@@ -1,2 +1,3 @@\n [pytest]\n"
                       " pythonpath = .\n+addopts = -p no:cacheprovider\n")
CHEAT = ("--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,2 @@\n+def test_add() -> None:\n"
         "+    assert True\n")
"""Writes the graded test file itself: the harness puts the test patch's version over it."""


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def make_dataset(root: Path, ids: list[str]) -> tuple[Path, Path]:
    """A clone with a buggy add() and a .jsonl of one instance per id at that commit."""
    repo = root / "repos" / "acme__calc"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    (repo / "calc.py").write_text("def add(a: int, b: int) -> int:\n    return a - b\n")
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    base = git(repo, "rev-parse", "HEAD")
    rows = [{
        "instance_id": instance_id, "repo": "acme/calc", "base_commit": base,
        "problem_statement": "add(2, 3) returns -1.", "patch": FIX + "\n",
        "test_patch": ("diff --git a/tests/test_calc.py b/tests/test_calc.py\nnew file mode "
                       "100644\n--- /dev/null\n+++ b/tests/test_calc.py\n@@ -0,0 +1,4 @@\n"
                       "+from calc import add\n+\n+def test_add() -> None:\n"
                       "+    assert add(2, 3) == 5\n"),
        "FAIL_TO_PASS": json.dumps(["tests/test_calc.py::test_add"]), "PASS_TO_PASS": "[]",
    } for instance_id in ids]
    jsonl = root / "mini.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return jsonl, root / "repos"


def write_predictions(path: Path, patches: dict[str, str | None]) -> Path:
    path.write_text("".join(
        json.dumps({"instance_id": i, "model_name_or_path": "acme/agent", "model_patch": p}) + "\n"
        for i, p in patches.items()))
    return path


def test_predictions_files_in_both_of_the_harness_shapes(tmp_path: Path) -> None:
    jsonl = write_predictions(tmp_path / "p.jsonl", {"a-1": "x", "a-2": None})
    assert [(p.instance_id, p.patch) for p in read_predictions(jsonl)] == [("a-1", "x"),
                                                                         ("a-2", None)]
    listed = tmp_path / "p.json"
    listed.write_text(json.dumps({"a-1": {"instance_id": "a-1", "model_patch": "y"}}))
    (only,) = read_predictions(listed)
    assert (only.instance_id, only.patch, only.model) == ("a-1", "y", "model")
    for text, message in (("", "no predictions"), ('{"model_patch": "x"}\n', "instance_id"),
                          ('{"instance_id": "a", "model_patch": 3}\n', "model_patch"),
                          ('{"instance_id": "a"}\n{"instance_id": "a"}\n', "second")):
        (tmp_path / "bad.jsonl").write_text(text)
        with pytest.raises(UsageError, match=message):
            read_predictions(tmp_path / "bad.jsonl")


def test_the_harness_report_format() -> None:
    judged: list[dict[str, Any]] = [
        {"instance_id": "a-1", "status": "resolved", "applied": "git apply",
         "tests": {"FAIL_TO_PASS": {"success": ["t"], "failure": []}}},
        {"instance_id": "a-2", "status": "empty_patch", "applied": None, "tests": {}},
    ]
    one = instance_report(judged[0])["a-1"]
    assert one["resolved"] and one["patch_successfully_applied"] and one["patch_exists"]
    assert one["tests_status"]["FAIL_TO_PASS"] == {"success": ["t"], "failure": []}
    assert set(one["tests_status"]) == {"FAIL_TO_PASS", "PASS_TO_PASS", "FAIL_TO_FAIL",
                                        "PASS_TO_FAIL"}
    run = run_report(judged, ["a-1", "a-2", "a-3"], ["a-1", "a-2"])
    assert (run["total_instances"], run["submitted_instances"], run["resolved_ids"],
            run["empty_patch_ids"], run["incomplete_ids"]) == (3, 2, ["a-1"], ["a-2"], ["a-3"])


@pytest.mark.slow
def test_eval_predictions_judges_like_the_harness(tmp_path: Path, sandbox_name: str) -> None:
    patches: dict[str, str | None] = {
        "acme__calc-1": FIX, "acme__calc-2": FUZZY, "acme__calc-3": CONFIG,
        "acme__calc-4": CHEAT, "acme__calc-5": "", "acme__calc-9": FIX,
    }
    jsonl, repos = make_dataset(tmp_path, [f"acme__calc-{i}" for i in range(1, 7)])
    preds = write_predictions(tmp_path / "preds.jsonl", patches)
    done = subprocess.run(
        [sys.executable, "-m", "ooda.agent.cli", "eval", str(jsonl), "--predictions", str(preds),
         "--repos-dir", str(repos), "--runs-dir", str(tmp_path / "runs"), "--eval-id", "p",
         "--sandbox", sandbox_name, "--concurrency", "2"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "OODA_DAEMON": "0"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "skipped acme__calc-9: not in the task set" in done.stderr
    eval_dir = tmp_path / "runs" / "p"
    records = {r["instance_id"]: r for r in map(
        json.loads, (eval_dir / "results.jsonl").read_text().splitlines())}
    assert set(records) == {f"acme__calc-{i}" for i in range(1, 6)}  # 6 has no prediction
    status = {i: (r["status"], r["applied"]) for i, r in records.items()}
    assert status == {
        "acme__calc-1": ("resolved", "git apply"),
        "acme__calc-2": ("resolved", "patch --fuzz=5"),
        "acme__calc-3": ("resolved", "git apply"),
        "acme__calc-4": ("unresolved", "git apply"),
        "acme__calc-5": ("empty_patch", None),
    }, records
    assert records["acme__calc-4"]["tests"]["FAIL_TO_PASS"]["failure"] == [
        "tests/test_calc.py::test_add"]
    run = json.loads((eval_dir / "acme__agent.p.json").read_text())
    assert run["resolved_ids"] == ["acme__calc-1", "acme__calc-2", "acme__calc-3"]
    assert run["total_instances"] == 6 and run["submitted_instances"] == 5
    report = json.loads((eval_dir / "logs" / "acme__calc-2" / "report.json").read_text())
    assert report["acme__calc-2"]["resolved"] is True
    summary = json.loads((eval_dir / "summary.json").read_text())
    assert (summary["resolved"], summary["applied_with_fuzz"]) == (3, 1)
