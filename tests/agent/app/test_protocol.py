"""The protocol of a run (agent/app/protocol.py): which one applies, and how a blind run's
record reads once the hidden tests judged it (or failed to)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from ooda.agent.app.protocol import (
    Judgement,
    blind_outcome,
    judging_recorded,
    protocol_for,
    runs_blind,
)
from ooda.agent.contracts.errors import InfraError
from ooda.agent.contracts.protocols import Verdict
from ooda.agent.core.loop import Attempt, RunResult
from ooda.agent.core.records import RunSummary
from ooda.agent.core.runlog import RunLog, SummaryRecorder
from ooda.tasks.loader import Task


def test_blind_is_the_default_for_hidden_tests_and_gold_is_the_oracle(tmp_path: Path) -> None:
    task = Task(id="t", statement="s", repo=tmp_path)
    assert protocol_for(False, "m") == "blind" and protocol_for(True, "m") == "oracle"
    assert protocol_for(False, "gold") == "oracle"
    assert not runs_blind(task, "blind")  # nothing hidden: its tests are in its repository
    task = dataclasses.replace(task, test_patch="diff --git a/t.py b/t.py\n")
    assert runs_blind(task, "blind") and not runs_blind(task, "oracle")


def result_with(tmp_path: Path) -> tuple[RunResult, RunLog, Attempt]:
    log = RunLog(tmp_path / "runs", "r")
    submitted = Attempt("r1c2", 1, None, [], status="passed", patch="diff --git a/x b/x\n")
    summary = RunSummary("r", "t", "passed", "passed", winner="r1c2", submitted_verified_s=4.5)
    return RunResult("passed", "passed", submitted, [submitted], 1, summary, submitted), log, \
        submitted


def test_the_hidden_tests_decide_the_status_and_the_loop_keeps_its_own(tmp_path: Path) -> None:
    result, log, submitted = result_with(tmp_path)
    failing = Verdict("failed", "pytest failed: test_hidden")
    judged = blind_outcome(result, Judgement(submitted, failing, {"r1c2": "failed"}),
                           SummaryRecorder(log))
    assert (judged.status, judged.winner) == ("failed", None)
    run = json.loads((log.dir / "run.json").read_text())
    assert (run["status"], run["loop_status"], run["resolved"]) == ("failed", "passed", False)
    assert run["time_to_first_pass_s"] is None and not run["oracle_coverage"]
    assert "does not pass the hidden tests (pytest failed: test_hidden)" in run["reason"]
    assert (log.dir / "submitted.diff").read_text() == submitted.patch
    assert not (log.dir / "final.diff").exists()
    passing = Judgement(submitted, Verdict("passed", "passed"), {"r1c2": "passed"})
    judged = blind_outcome(result, passing, SummaryRecorder(log))
    run = json.loads((log.dir / "run.json").read_text())
    assert judged.winner is submitted and run["time_to_first_pass_s"] == 4.5
    assert run["oracle"] == {"submitted_verdict": "passed", "judged": {"r1c2": "passed"},
                             "n": 1, "c": 1, "seconds": 0.0}
    assert (log.dir / "final.diff").read_text() == submitted.patch


def test_a_judge_that_breaks_leaves_an_error_not_the_loops_pass(tmp_path: Path) -> None:
    result, log, _ = result_with(tmp_path)
    with pytest.raises(InfraError), judging_recorded(result, SummaryRecorder(log)):
        raise InfraError("the docker sandbox broke while verifying: the container went away")
    run = json.loads((log.dir / "run.json").read_text())
    assert (run["status"], run["loop_status"], run["winner"]) == ("error", "passed", None)
    assert run["reason"].startswith("judging the submitted patch: the docker sandbox broke")
