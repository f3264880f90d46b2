"""The security watchdog from the outside: `ooda run` (real CLI, real HTTP to the bundled
endpoint at 250 tokens/s, real sandbox) on a task whose first answer opens with a vulnerable
line: the stream is halted at that line, the same candidate is corrected at once with the
finding, and the run passes in the first round with the safe fix. With `--no-watchdog` the same
answer streams to its end and fails the security stage after the tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import backend_or_skip
from test_run_acceptance import EXAMPLES, ooda, read_attempts, run_dir

from ooda.agent.models.server import ReplayServer

OLD = "    return dict(Counter(_WORD.findall(text)))"
VULNERABLE = f"""The words must be compared lower-cased.

word_count.py
<<<<<<< SEARCH
{OLD}
=======
    text = eval(repr(text)).lower()
    return dict(Counter(_WORD.findall(text)))
>>>>>>> REPLACE

""" + "Why this works: " + " ".join(
    ["word_counts() read the text as written, so 'The' and 'the' were two words, and the"
     " regular expression only matches lower-case letters, which cut 'The' to 'he'."] * 12
) + "\n"
SAFE = f"""Without eval: lower-case the text before matching.

word_count.py
<<<<<<< SEARCH
{OLD}
=======
    return dict(Counter(_WORD.findall(text.lower())))
>>>>>>> REPLACE
"""


@pytest.fixture(autouse=True)
def _docker() -> None:
    backend_or_skip("docker")


@pytest.fixture
def task(tmp_path: Path) -> Path:
    dest = tmp_path / "word_count"
    shutil.copytree(EXAMPLES / "word_count", dest, ignore=shutil.ignore_patterns(".*_cache"))
    with (dest / "replay.jsonl").open("w") as f:
        f.write(json.dumps({"round": 1, "answer": VULNERABLE}) + "\n")
        f.write(json.dumps({"round": 2, "contains": "security watchdog", "answer": SAFE}) + "\n")
    return dest


def run(task: Path, runs: Path, *extra: str) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    with ReplayServer([task], tokens_per_s=250.0) as server:
        proc = ooda("run", str(task), "--model", "m", "--base-url", server.base_url,
                    "-n", "1", "--rounds", "1", "--runs-dir", str(runs), "--json", *extra)
        summary = json.loads(proc.stdout) if proc.stdout.strip() else {}
        summary["chat_requests"] = server.stats["chat_requests"]
    return proc.returncode, summary, read_attempts(run_dir(runs))


def test_a_vulnerable_answer_is_halted_and_corrected_in_the_same_round(
    task: Path, tmp_path: Path
) -> None:
    code, summary, attempts = run(task, tmp_path / "runs")
    assert code == 0, summary
    assert summary["status"] == "passed" and summary["rounds_used"] == 1
    assert summary["chat_requests"] == 2  # the halted answer and its correction
    (attempt,) = attempts
    assert attempt["status"] == "passed"
    assert attempt["halted_by"] == ["S307 eval"]
    # the halted answer stopped at its eval line: the explanation after it never streamed
    assert attempt["chars_saved"] > 0
    diff = (run_dir(tmp_path / "runs") / "final.diff").read_text()
    assert "text.lower()" in diff and "eval" not in diff


def test_without_the_watchdog_the_answer_fails_after_the_tests(
    task: Path, tmp_path: Path
) -> None:
    code, summary, attempts = run(task, tmp_path / "runs", "--no-watchdog")
    assert code != 0 and summary["status"] == "failed"
    assert summary["chat_requests"] == 1
    (attempt,) = attempts
    assert attempt["status"] == "failed" and "halted_by" not in attempt
    stages = {v["name"]: v["status"] for v in attempt["verifiers"]}
    assert stages["pytest"] == "passed" and stages["security"] == "failed"
