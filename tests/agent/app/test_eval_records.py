"""results.jsonl lines (agent/app/evaluate/records.py): one type, TaskResult, for a finished run
and for a task that could not be run."""

from __future__ import annotations

from pathlib import Path

from ooda.agent.app.evaluate.records import TaskResult, error_record, run_record
from ooda.agent.core.records import RunSummary
from ooda.agent.core.runlog import RunLog


def test_an_error_line_has_every_key_a_run_line_has(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "tasks", "t1")
    summary = RunSummary.error(log.run_id, "t1", "the sandbox broke")
    ran = run_record("t1", "error", summary, log.dir, tmp_path)
    failed = error_record("t2", "no engine", 1.23456, tmp_path / "tasks" / "t2", tmp_path)
    assert list(ran) == list(failed) == list(TaskResult.__dataclass_fields__)
    assert failed["status"] == "error" and failed["reason"] == "no engine"
    assert failed["wall_s"] == 1.235 and failed["run_dir"] is None  # no run directory made
    assert (failed["models"], failed["edit_formats"], failed["last_reason"]) == ({}, {}, "")
    assert ran["run_dir"] == "tasks/t1"
