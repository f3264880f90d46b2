"""The typed records (agent/core/records.py): what is written is what is read back, older or
newer files read without error, and the optional keys stay out of run.json when empty."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.core.records import (
    AttemptRecord,
    HiddenJudging,
    RunSummary,
    StageRecord,
    Tokens,
)
from ooda.agent.core.runlog import RunLog, SummaryRecorder, read_attempts, read_summary


def test_a_run_directory_reads_back_what_was_written(tmp_path: Path) -> None:
    log = RunLog(tmp_path, "run-1")
    record = AttemptRecord("r1c1", round=1, model="m", t_start_s=0.0, t_first_token_s=0.5,
                           t_generated_s=1.0, t_verified_s=2.0, prompt_tokens=10,
                           completion_tokens=3, patch_sha256="abc", status="failed",
                           reason="pytest: 1 failed", edit_format="search_replace",
                           verifiers=[StageRecord("pytest", "failed", 1.25, "1 failed")])
    log.record_attempt(record)
    summary = RunSummary("run-1", "t", "failed", "rounds exhausted", model="m", attempts=1,
                         tokens=Tokens(10, 3), environment="environment: from env.toml")
    SummaryRecorder(log).record(summary)
    assert read_attempts(log.dir) == [record]
    assert read_summary(log.dir) == summary


def test_old_and_new_keys_and_empty_optional_fields(tmp_path: Path) -> None:
    old = RunSummary.from_json({"run_id": "r", "task_id": "t", "status": "error",
                                "reason": "x", "attempts": 0, "winner": None,
                                "a_field_from_a_newer_ooda": 1})
    assert old.tokens == Tokens() and old.models == {} and old.fail_to_pass == []
    written = RunSummary("r", "t", "passed").to_json()
    assert "environment" not in written and "fail_to_pass_passing_before" not in written
    assert written["tokens"] == {"prompt": 0, "completion": 0, "estimated": False,
                                 "counted": False}
    attempt = AttemptRecord.from_json({"attempt_id": "r1c1", "verifiers": [{"name": "ruff",
                                                                          "status": "passed"}]})
    assert attempt.verifiers == [StageRecord("ruff", "passed")]


def test_a_blind_runs_hidden_judging_is_typed_and_its_json_unchanged() -> None:
    judging = HiddenJudging("passed", {"r1c1": "passed", "r1c2": "failed"}, n=2, c=1,
                            seconds=1.5)
    written = RunSummary("r", "t", "passed", oracle=judging).to_json()
    assert written["oracle"] == {"submitted_verdict": "passed",
                                 "judged": {"r1c1": "passed", "r1c2": "failed"},
                                 "n": 2, "c": 1, "seconds": 1.5}
    assert RunSummary.from_json(written).oracle == judging
    assert RunSummary.from_json({"oracle": None}).oracle is None
