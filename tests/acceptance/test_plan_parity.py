"""One plan for every command (issue 22), from the outside: the real CLI, real HTTP to the
bundled endpoint, real Docker.

- `ooda verify` and `ooda run` judge the same patch the same way on a plain repository whose
  tests need a third-party package: both detect and build its environment (the demo of
  tests/acceptance/test_detected_environment.py, so one image serves both), both pass the right
  fix and fail a wrong one.
- A base whose tests cannot even be imported (a package the environment lacks) stops `ooda
  run` with exit 2 before any candidate is judged (the first answer, asked for while the base
  check ran, is discarded and run.json says so), naming the module and what to do; `ooda
  verify` stops the same way."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sandbox_helpers import backend_or_skip
from test_detected_environment import DETECTED, FIX, ooda, repo  # noqa: F401 - fixture

from ooda.agent.models.server import ReplayServer

RIGHT = """\
--- a/src/demo/__init__.py
+++ b/src/demo/__init__.py
@@ -1,2 +1,2 @@
 def greet():
-    return "helo"
+    return "hello"
"""
WRONG = RIGHT.replace('+    return "hello"', '+    return "hallo"')
WRONG_ANSWER = FIX.replace('    return "hello"\n>>>>>>>', '    return "hallo"\n>>>>>>>')
TESTS = ["--fail-to-pass", "tests/test_demo.py::test_greet",
         "--pass-to-pass", "tests/test_demo.py::test_env"]


def run_status(root: Path, tmp_path: Path, answer: str, name: str,
               *extra: str) -> tuple[subprocess.CompletedProcess[str], dict[str, int]]:
    """`ooda run` with one scripted answer: its process and the endpoint's counters (its
    request log, one line per chat request, is `{name}-requests.jsonl`)."""
    replay = tmp_path / f"{name}.jsonl"
    replay.write_text(json.dumps({"task": "demo", "answer": answer}) + "\n")
    with ReplayServer([replay], request_log=tmp_path / f"{name}-requests.jsonl") as server:
        done = ooda("run", ".", "--statement", "greet() should say hello", *TESTS, "-n", "1",
                    "--rounds", "1", "--model", "m", "--base-url", server.start(),
                    "--runs-dir", str(tmp_path / f"runs-{name}"), *extra, cwd=root)
        return done, dict(server.stats)


def verify_status(root: Path, tmp_path: Path, patch: str, name: str,
                  *extra: str) -> subprocess.CompletedProcess[str]:
    diff = tmp_path / f"{name}.diff"
    diff.write_text(patch)
    return ooda("verify", ".", "--patch", str(diff), *TESTS, "--json", *extra, cwd=root)


@pytest.mark.slow
def test_verify_and_run_give_the_same_verdict(repo: Path, tmp_path: Path) -> None:  # noqa: F811
    backend_or_skip("docker")
    right = verify_status(repo, tmp_path, RIGHT, "right")
    assert right.returncode == 0, right.stderr
    assert json.loads(right.stdout)["status"] == "passed" and DETECTED in right.stderr
    ran, _ = run_status(repo, tmp_path, FIX, "right")
    assert ran.returncode == 0 and "PASSED demo" in ran.stderr, ran.stderr
    assert (tmp_path / "right-requests.jsonl").read_text().count("\n") == 1

    wrong = verify_status(repo, tmp_path, WRONG, "wrong")
    assert wrong.returncode == 1 and json.loads(wrong.stdout)["status"] == "failed"
    ran_wrong, _ = run_status(repo, tmp_path, WRONG_ANSWER, "wrong")
    assert ran_wrong.returncode == 1 and "FAILED demo" in ran_wrong.stderr, ran_wrong.stderr


@pytest.mark.slow
def test_an_uncollectable_base_stops_the_run_before_any_candidate_is_judged(
        repo: Path, tmp_path: Path) -> None:  # noqa: F811
    backend_or_skip("docker")
    ran, stats = run_status(repo, tmp_path, FIX, "none", "--environment", "none")
    assert ran.returncode == 2, ran.stderr
    [error] = [line for line in ran.stderr.splitlines() if line.startswith("ooda: error:")]
    assert "tests/test_demo.py" in error and "'markupsafe'" in error
    assert "--environment auto" in error and "requirements" in error
    # the task names its tests: the first request went out while the base check ran
    # (agent/app/basegate.py); its answer was never judged, and run.json says so
    [record] = (tmp_path / "runs-none").glob("*/run.json")
    summary = json.loads(record.read_text())
    assert summary["status"] == "error" and "the base check failed" in summary["reason"]
    assert "'markupsafe'" in summary["reason"]
    assert summary["statuses"].get("passed", 0) == summary["statuses"].get("failed", 0) == 0
    if stats["chat_requests"]:  # each request the endpoint logged; its answer discarded
        assert "answer(s) received meanwhile were discarded" in summary["reason"]
        assert (tmp_path / "none-requests.jsonl").exists()
    verified = verify_status(repo, tmp_path, RIGHT, "none", "--environment", "none")
    assert verified.returncode == 2 and "'markupsafe'" in verified.stderr
