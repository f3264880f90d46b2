"""`ooda eval` judged blind, from the outside: the real CLI, real HTTP to the bundled endpoint
(which logs every request it is sent), real Docker sandboxes.

Each task's tests come from a test patch (hidden tests). Blind (the default), no request may
carry a hidden test's name or any of its lines, and the hidden tests judge only the patch ooda
submits; `--oracle` feeds their failures back, and the scripted model answers the hidden
assertion it is shown with the fix. A scripted reproduction test that fails on the base and
passes with the right fix makes that fix win over a wrong one that keeps the regression tests
passing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer
from ooda.tasks.hidden import hidden_tests
from ooda.tasks.loader import load_task

STATS = "def mean(xs):\n    return sum(xs) // len(xs)\n"
STATS_TESTS = "from stats import mean\n\n\ndef test_mean_of_equal_values():\n    " \
              "assert mean([4, 4]) == 4\n"
HIDDEN_STATS = ("\n\ndef test_mean_of_two_values_is_fractional():\n"
                "    assert mean([1, 2]) == 1.5, 'hidden: the mean of 1 and 2'\n")
REPRODUCTION = ("Here is a script that reproduces it.\n```python\nfrom stats import mean\n\n"
                "got = mean([3, 4])\nassert got == 3.5, f'mean([3, 4]) gave {got}'\n```\n")

WORDS = "def shout(text):\n    return text.upper()\n"
WORDS_TESTS = "from words import shout\n\n\ndef test_shout_letters():\n    " \
              "assert shout('ab') == 'AB'\n"
HIDDEN_WORDS = ("\n\ndef test_shout_drops_the_surrounding_spaces():\n"
                "    assert shout(' hey ') == 'HEY', 'hidden: no spaces around a shout'\n")


def edit(path: str, old: str, new: str) -> str:
    return f"{path}\n<<<<<<< SEARCH\n{old}\n=======\n{new}\n>>>>>>> REPLACE\n"


def added_file_diff(path: str, old: str, added: str) -> str:
    """A git diff appending `added` to the file `path` whose text is `old`."""
    old_lines = old.splitlines()
    new_lines = added.splitlines()
    head = f"@@ -1,{len(old_lines)} +1,{len(old_lines) + len(new_lines)} @@\n"
    body = "".join(f" {line}\n" for line in old_lines) + "".join(f"+{line}\n" for line in new_lines)
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n{head}{body}"


@dataclass(frozen=True)
class TaskTests:
    """A task's test file: its path, the test it has and the hidden one its test patch adds
    (`hidden`: that test's source)."""

    path: str
    existing_test: str
    hidden_test: str
    hidden: str


def make_task(root: Path, name: str, files: dict[str, str], tests: TaskTests, statement: str,
              replay: list[dict[str, Any]]) -> None:
    test_file, hidden, hidden_test, existing_test = (tests.path, tests.hidden, tests.hidden_test,
                                                     tests.existing_test)
    task = root / name
    for rel, text in files.items():
        (task / "repo" / rel).parent.mkdir(parents=True, exist_ok=True)
        (task / "repo" / rel).write_text(text)
    (task / "tests.diff").write_text(added_file_diff(test_file, files[test_file], hidden))
    (task / "task.toml").write_text(textwrap.dedent(f"""\
        statement = "{statement}"
        fail_to_pass = ["{test_file}::{hidden_test}"]
        pass_to_pass = ["{test_file}::{existing_test}"]
        test_patch = "tests.diff"
        [verifiers]
        mypy = false
        timeout_s = 60
        """))
    (task / "replay.jsonl").write_text("".join(json.dumps({"task": name, **line}) + "\n"
                                               for line in replay))


@pytest.fixture
def taskset(tmp_path: Path) -> Path:
    root = tmp_path / "hidden-set"
    make_task(
        root, "stats", {"stats.py": STATS, "tests/test_stats.py": STATS_TESTS,
                        "pytest.ini": "[pytest]\npythonpath = .\n"},
        TaskTests("tests/test_stats.py", "test_mean_of_equal_values",
                 "test_mean_of_two_values_is_fractional", HIDDEN_STATS),
        "mean() truncates: the mean of 3 and 4 is 3.5, not 3.",
        [
            # the wrong fix keeps the regression test passing; only the right one passes
            # the reproduction test
            {"round": 1, "answer": edit("stats.py", "    return sum(xs) // len(xs)",
                                        "    return round(sum(xs) / len(xs))")},
            {"round": 1, "answer": edit("stats.py", "    return sum(xs) // len(xs)",
                                        "    return sum(xs) / len(xs)")},
            {"kind": "reproduction", "answer": REPRODUCTION},
        ])
    make_task(
        root, "words", {"words.py": WORDS, "tests/test_words.py": WORDS_TESTS,
                        "pytest.ini": "[pytest]\npythonpath = .\n"},
        TaskTests("tests/test_words.py", "test_shout_letters",
                 "test_shout_drops_the_surrounding_spaces", HIDDEN_WORDS),
        "shout() should shout.",
        [
            # round 1 misses the point; in round 2 only a model shown the hidden assertion
            # (the oracle's feedback) knows what to do
            {"round": 1, "answer": edit("words.py", "    return text.upper()",
                                        "    return str(text).upper()")},
            {"round": 2, "contains": "hidden: no spaces around a shout",
             "answer": edit("words.py", "    return str(text).upper()",
                            "    return str(text).strip().upper()")},
            {"round": 2, "answer": edit("words.py", "    return str(text).upper()",
                                        "    return str(text).upper().upper()")},
        ])
    return root


def ooda(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    return subprocess.run([sys.executable, "-m", "ooda.agent.cli", *args], env=env,
                          capture_output=True, text=True, timeout=600)


def evaluate(taskset: Path, runs: Path, log: Path, *extra: str) -> Path:
    with ReplayServer([taskset], request_log=log) as server:
        proc = ooda("eval", str(taskset), "--model", "m", "--base-url", server.base_url,
                    "-n", "2", "--rounds", "2", "--runs-dir", str(runs), "--eval-id", "e",
                    "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return runs / "e"


def requests(log: Path) -> list[str]:
    """Each logged request's messages, as one text."""
    return ["\n".join(str(m.get("content")) for m in json.loads(line)["messages"])
            for line in log.read_text().splitlines()]


def read(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_blind_hides_the_hidden_tests_and_oracle_feeds_them_back(
    taskset: Path, tmp_path: Path
) -> None:
    backend_or_skip("docker")
    hidden = {name: hidden_tests(load_task(taskset / name)) for name in ("stats", "words")}
    assert all(h.names and h.lines for h in hidden.values())

    blind_log = tmp_path / "blind.jsonl"
    blind = evaluate(taskset, tmp_path / "blind", blind_log)
    sent = requests(blind_log)
    assert any("reproduction test" in text for text in sent)  # the tests were asked for
    for text in sent:
        for h in hidden.values():
            assert h.leaks(text) == [], text
            assert not any(test_id in text for test_id in h.ids)
    summary = json.loads((blind / "summary.json").read_text())
    assert summary["protocol"] == "blind" and summary["hidden_test_tasks"] == 2
    results = {r["task_id"]: r for r in read(blind / "results.jsonl")}
    # stats: the reproduction test told the right fix from the wrong one
    assert results["stats"]["status"] == "resolved" and results["stats"]["oracle_coverage"]
    run = json.loads((blind / "tasks" / "stats" / "run.json").read_text())
    assert run["resolved"] and run["reproduction"]["required"] == 1
    submitted = (blind / "tasks" / "stats" / "submitted.diff").read_text()
    assert "+    return sum(xs) / len(xs)" in submitted
    assert "passes 1 reproduction test" in run["selection"]["why"]
    assert run["selection"]["finalists"][0] == run["selection"]["winner"]
    # words: nothing it may see tells the point of the issue; the hidden tests judge once
    assert results["words"]["status"] == "unresolved"
    assert not results["words"]["oracle_coverage"]
    assert (summary["resolved"], summary["oracle_coverage"]) == (1, 1)
    predictions = read(blind / "predictions.jsonl")
    assert {p["ooda_protocol"] for p in predictions} == {"blind"}
    assert "protocol **blind**" in (blind / "report.md").read_text()

    oracle_log = tmp_path / "oracle.jsonl"
    oracle = evaluate(taskset, tmp_path / "oracle", oracle_log, "--oracle")
    summary = json.loads((oracle / "summary.json").read_text())
    assert summary["protocol"] == "oracle" and summary["resolved"] == 2
    sent = requests(oracle_log)
    assert any(hidden["words"].leaks(text) for text in sent)  # fed back: the check can see it
    assert not any("reproduction test" in text for text in sent)
    assert {p["ooda_protocol"] for p in read(oracle / "predictions.jsonl")} == {"oracle"}
    assert "protocol **oracle**" in (oracle / "report.md").read_text()
