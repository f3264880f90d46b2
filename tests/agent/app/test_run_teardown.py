"""run_task's `teardown` (agent/app/run.py) and agent/support/exits.py's deferred work: `ooda run`
leaves the closing of its sandboxes and the removal of its work directory for after its output
(a daemon's worker does it once its client has the exit code). The result is complete before:
run.json, attempts.jsonl and the winning patch are written; nothing is left once the deferred
work ran. The reference patch on the `median` example, in a local sandbox."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ooda.agent.app.run import RunOptions, run_task
from ooda.agent.sandbox.local import LocalBackend
from ooda.agent.support import exits
from ooda.tasks.loader import load_task


def work_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("ooda-*"))


@pytest.mark.parametrize("deferred", [True, False])
def test_a_run_left_to_close_later_has_its_result_written_first(
    median: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, deferred: bool
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    pending: list[Callable[[], None]] = []
    options = RunOptions.of(model="gold", runs_dir=tmp_path / "runs")
    result, log = run_task(load_task(median), options, backend=LocalBackend(),
                           show_progress=False, teardown=pending.append if deferred else None)
    assert result.status == "passed"
    summary = json.loads((log.dir / "run.json").read_text())
    assert summary["status"] == "passed" and (log.dir / "final.diff").is_file()
    assert len(log.dir.joinpath("attempts.jsonl").read_text().splitlines()) == 1
    if deferred:
        assert len(pending) == 1 and work_dirs(temp)  # its sandbox's slot is still there
        pending.pop()()
    assert work_dirs(temp) == []


def test_deferred_work_waits_for_the_command_line_that_asked_for_it() -> None:
    done: list[str] = []

    def command() -> None:
        exits.after_output(lambda: done.append("closed"))
        done.append("printed")
        raise SystemExit(1)

    assert exits.run_here(command) == 1 and done == ["closed", "printed"]  # at once
    done.clear()
    assert exits.run_here(command, defer=True) == 1 and done == ["printed"]
    exits.run_deferred()
    assert done == ["printed", "closed"]
    exits.run_deferred()  # once
    assert done == ["printed", "closed"]
    exits.after_output(lambda: done.append("after"))  # no command deferring: at once
    assert done[-1] == "after"


ENDING = """
import os, sys, tempfile
from ooda.agent.support import exits
report, kept = sys.argv[1], []

def command():
    work = tempfile.TemporaryDirectory(dir=os.path.dirname(report))  # removed at exit, else
    kept.append(work)
    exits.after_output(lambda: open(report, "w").write(str(os.path.isdir(work.name))))
    print("result")
    raise SystemExit(1)

exits.exit_now(exits.run_here(command, defer=True))
"""


def test_a_process_ending_runs_the_deferred_work_before_its_exit_handlers(
    tmp_path: Path,
) -> None:
    """exit_now: the output, then the deferred work (the run's sandboxes still in their work
    directory), then the exit handlers (which remove temporary directories left)."""
    report = tmp_path / "report"
    proc = subprocess.run([sys.executable, "-c", ENDING, str(report)], capture_output=True,
                          text=True, timeout=60, check=False)
    assert proc.returncode == 1 and proc.stdout == "result\n", proc.stderr
    assert report.read_text() == "True"  # the directory was still there for it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # and gone at the end
