"""Acceptance: answers written as whole files or as bare functions in prose resolve what the
same fixes as diffs resolve, end to end (QuixBugs tasks, `ooda serve --answer-as` over real
HTTP through the openai client, the real sandbox)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ooda.agent.app.evaluate import run as ev
from ooda.agent.app.run import RunOptions
from ooda.agent.models.server import ReplayServer

ROOT = Path(__file__).resolve().parents[2]
QUIXBUGS = ROOT.parent / "shared" / "datasets" / "quixbugs"
PROGRAMS = ["gcd", "get_factors", "flatten", "is_valid_parenthesization"]  # none hangs unpatched


@pytest.mark.slow
def test_whole_files_and_bare_functions_resolve_like_diffs(tmp_path: Path,
                                                          sandbox_name: str) -> None:
    from ooda.tasks.importers import import_quixbugs

    if not QUIXBUGS.is_dir():
        pytest.skip(f"no QuixBugs at {QUIXBUGS}")
    taskset = tmp_path / "quixbugs"
    for task in import_quixbugs(QUIXBUGS, taskset, only=PROGRAMS):
        gold = (task / "gold.diff").read_text()
        script = {"answer": f"The fix:\n\n```diff\n{gold}```\n"}
        (task / "replay.jsonl").write_text(json.dumps(script) + "\n")
    with ReplayServer([taskset], answer_as="mixed") as server:
        run = RunOptions.of(model="chatty", base_url=server.base_url, samples=1, rounds=1,
                            time_budget_s=120.0, runs_dir=tmp_path / "runs")
        out = ev.evaluate(ev.EvalOptions(taskset=taskset, run=run, concurrency=2),
                          show_progress=False)
    s = out.summary
    assert (s["total"], s["resolved"], s["errors"]) == (4, 4, 0), s
    assert s["edit_formats"] == {"definitions": 2, "whole_file": 2}
    assert s["invalid_reasons"] == {}
    report = (out.eval_dir / "report.md").read_text()
    assert "## Answers by edit format" in report and "| whole_file | 2 |" in report
    for task in taskset.iterdir():
        attempts = (out.eval_dir / "tasks" / task.name / "attempts.jsonl").read_text()
        record = json.loads(attempts.splitlines()[0])
        assert record["edit_format"] in ("whole_file", "definitions")
        assert record["invalid_reason"] is None
