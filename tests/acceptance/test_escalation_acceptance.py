"""Escalation and the security stage from the outside (issue 16): the real CLI, real HTTP to
the bundled endpoint serving a fast and a strong model, the Docker sandbox."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_run_acceptance import edit, ooda, read_attempts, run_dir

from ooda.agent.models.server import ReplayServer, ServedModel

OLD = "    return (ordered[middle] + ordered[middle + 1]) / 2"
GOOD = "    return (ordered[middle - 1] + ordered[middle]) / 2"
WRONG = "    return (ordered[middle - 1] + ordered[middle]) // 2"
HEADER = "from collections.abc import Sequence"
SHELL = (
    "import subprocess\nfrom collections.abc import Sequence\n\n\n"
    "def run(cmd: str) -> str:\n"
    "    return subprocess.run(cmd, shell=True, capture_output=True, text=True).stdout"
)
KEY = 'from collections.abc import Sequence\n\nAWS_ACCESS_KEY_ID = "AKIAQWERTYUIOPASDFGH"'
FIXED = edit("median.py", OLD, GOOD)
DIGEST = "A faster model tried this task first"
OWN = "changed files:\n"
"""How the parent's own security verdict starts a line of its feedback (a sibling's failure
is quoted on one line, so an answer scripted on OWN + finding needs the parent's own)."""


def script(path: Path, lines: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps({"task": "median", **line}) + "\n" for line in lines))
    return path


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[ReplayServer]:
    """fast never solves median; strong solves it, but only when told of fast's failures."""
    replay = script(
        tmp_path / "replay.jsonl",
        [
            {"model": "fast", "answer": edit("median.py", OLD, WRONG)},
            {"model": "strong", "contains": DIGEST, "answer": FIXED},
            {"model": "strong", "answer": "I am not sure what to change."},
        ],
    )
    served = [ServedModel("fast", 0.0, 0.1, 0.4), ServedModel("strong", 0.0, 3.0, 15.0)]
    with ReplayServer([replay], served=served) as server:
        yield server


def test_a_task_the_fast_model_never_solves_is_solved_after_escalation(
    pair: ReplayServer, median: Path, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    proc = ooda(
        "run", str(median), "--model", "fast,strong", "--base-url", pair.base_url,
        "-n", "2", "--rounds", "3", "--runs-dir", str(runs), "--json",
        "--price-prompt", "0.1", "--price-completion", "0.4",
        "--escalate-price-prompt", "3", "--escalate-price-completion", "15",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["status"] == "passed" and summary["winner_model"] == "strong"
    assert summary["escalated_at_round"] == 3  # default: the last round
    models = summary["models"]
    assert models["fast"]["attempts"] == 4 and not models["fast"]["solved"]
    assert models["strong"]["solved"] and models["strong"]["role"] == "strong"
    assert 0 < models["fast"]["cost_usd"] < models["strong"]["cost_usd"]
    run_json = json.loads((run_dir(runs) / "run.json").read_text())
    assert run_json["models"] == models
    attempts = read_attempts(run_dir(runs))
    assert {a["model"] for a in attempts if a["round"] < 3} == {"fast"}
    strong = [a for a in attempts if a["round"] == 3]
    assert strong and all(a["model"] == "strong" and a["parent_id"] is None for a in strong)
    report = ooda("report", str(run_dir(runs)))
    assert report.returncode == 0, report.stderr
    markdown = (run_dir(runs) / "report.md").read_text()
    assert "solved by fast: 0, by strong: 1; cost" in markdown
    assert "Escalated to strong at round 3" in markdown


def insecure(header: str) -> str:
    return edit("median.py", HEADER, header) + "\n" + FIXED


@pytest.fixture
def single(tmp_path: Path) -> Iterator[ReplayServer]:
    """Round 1 of "mixed": an insecure candidate that passes the tests and a clean one. Round 1
    of "insecure": only insecure ones; its round 2 removes each finding, but is scripted to
    answer so only when the feedback names it."""
    replay = script(
        tmp_path / "replay.jsonl",
        [
            {"model": "mixed", "answer": insecure(SHELL)},
            {"model": "mixed", "answer": FIXED},
            {"model": "insecure", "round": 1, "answer": insecure(SHELL)},
            {"model": "insecure", "round": 1, "answer": insecure(KEY)},
            {"model": "insecure", "round": 2, "contains": OWN + "median.py:8:12: S602",
             "answer": edit("median.py", SHELL, HEADER)},
            {"model": "insecure", "round": 2, "contains": OWN + "median.py:5:22: SECRET",
             "answer": edit("median.py", KEY, HEADER)},
        ],
    )  # fmt: skip
    with ReplayServer([replay], served=[ServedModel("mixed"), ServedModel("insecure")]) as server:
        yield server


def security_run(server: ReplayServer, median: Path, runs: Path, model: str, rounds: int) -> Any:
    """The after-tests security stage at work: the watchdog, which would halt these answers
    while they stream and have them corrected at once, is off (tests/acceptance/
    test_watchdog_acceptance.py tests it)."""
    proc = ooda(
        "run", str(median), "--model", model, "--base-url", server.base_url, "-n", "2",
        "--rounds", str(rounds), "--runs-dir", str(runs), "--json", "--select", "best",
        "--no-watchdog",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    attempts = {a["attempt_id"]: a for a in read_attempts(run_dir(runs))}
    final = (run_dir(runs) / "final.diff").read_text()
    assert summary["status"] == "passed" and "subprocess" not in final and "AKIA" not in final
    return summary, attempts


def stages(attempt: dict[str, Any]) -> dict[str, str]:
    return {v["name"]: v["status"] for v in attempt["verifiers"]}


def test_an_insecure_passing_candidate_loses_to_a_clean_one(
    single: ReplayServer, median: Path, tmp_path: Path
) -> None:
    summary, attempts = security_run(single, median, tmp_path / "runs", "mixed", 1)
    loser = [a for a in attempts.values() if a["status"] == "failed"]
    assert len(loser) == 1 and stages(loser[0])["pytest"] == "passed"
    assert stages(loser[0])["security"] == "failed" and "S602" in loser[0]["reason"]
    assert stages(attempts[summary["winner"]])["security"] == "passed"


def test_security_findings_reach_the_next_round(
    single: ReplayServer, median: Path, tmp_path: Path
) -> None:
    summary, attempts = security_run(single, median, tmp_path / "runs", "insecure", 2)
    first = [a for a in attempts.values() if a["round"] == 1]
    assert len(first) == 2
    assert all(stages(a)["pytest"] == "passed" and a["status"] == "failed" for a in first)
    # round 2 is scripted to fix only when its feedback names the finding: both did
    second = [a for a in attempts.values() if a["round"] == 2]
    assert len(second) == 2 and all(a["status"] == "passed" for a in second)
    assert attempts[summary["winner"]]["round"] == 2


def test_eval_compares_fast_only_strong_only_and_the_cascade(
    pair: ReplayServer, median: Path, tmp_path: Path
) -> None:
    taskset = tmp_path / "set"
    taskset.mkdir()
    median.rename(taskset / "median")
    runs = tmp_path / "runs"
    proc = ooda(
        "eval", str(taskset), "--model", "fast", "--escalate-to", "strong",
        "--base-url", pair.base_url, "-n", "2", "--rounds", "2", "--runs-dir", str(runs),
        "--price-prompt", "0.1", "--price-completion", "0.4", "--escalate-price-prompt", "3",
        "--escalate-price-completion", "15", "--eval-id", "cmp", "--compare", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    table = json.loads(proc.stdout)
    assert list(table) == ["fast-only", "strong-only", "cascade"]
    assert table["fast-only"]["resolved"] == 0
    assert table["strong-only"]["resolved"] == 0  # strong solves only when told of fast's tries
    assert table["cascade"]["resolved"] == 1
    assert table["cascade"]["models"]["strong"]["solved"] == 1
    report = (runs / "cmp-cascade-compare.md").read_text()
    assert "| cascade | 1/1 |" in report and "for strong alone" in report
