"""The run directory: run.json (atomic, last), attempts.jsonl (appended), final.diff, attempts/.

The records written are the types of agent/core/records.py (RunSummary, AttemptRecord);
`read_summary` and `read_attempts` read them back from a run directory.

A write that fails (a full disk, a read-only or vanished directory) raises InfraError naming
the directory and the reason: the run cannot keep its record, so it ends with exit 3.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ooda.agent.contracts.errors import InfraError
from ooda.agent.core.records import AttemptRecord, RunSummary


def new_run_id(task_id: str) -> str:
    """A sortable, unique, filesystem-safe id: UTC time, task id, random suffix."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", task_id)[:60] or "task"
    return f"{stamp}-{safe}-{secrets.token_hex(3)}"


def write_atomic(path: Path, text: str) -> None:
    """Write a file so that readers see either the old or the whole new content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_json_atomic(path: Path, data: Any) -> None:
    write_atomic(path, json.dumps(data, indent=2, sort_keys=False) + "\n")


def append_jsonl(path: Path, record: dict[str, Any], lock: threading.Lock) -> None:
    """Append one JSON line and fsync it, so a crash never loses a finished record."""
    line = json.dumps(record, sort_keys=False) + "\n"
    with lock, open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def mark_runs_dir(runs_dir: Path) -> None:
    """Create the runs directory with a `.gitignore` of `*` when new, so that runs written into
    a user's checkout (the default `runs/` of `ooda run .`) leave `git status` clean."""
    if runs_dir.exists():
        return
    runs_dir.mkdir(parents=True, exist_ok=True)
    (runs_dir / ".gitignore").write_text("# written by ooda: run directories\n*\n")


class RunLog:
    """Everything one run leaves on disk, under runs_dir/run_id."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.run_id = run_id
        self.dir = runs_dir / run_id
        self.attempts_path = self.dir / "attempts.jsonl"
        with self._writing():
            mark_runs_dir(runs_dir)
            (self.dir / "attempts").mkdir(parents=True, exist_ok=False)
            self.attempts_path.touch()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        try:
            yield
        except FileExistsError:
            raise
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise InfraError(f"cannot write the run directory {self.dir}: {reason}") from exc

    def attempt_dir(self, attempt_id: str) -> Path:
        path = self.dir / "attempts" / attempt_id
        with self._writing():
            path.mkdir(parents=True, exist_ok=True)
        return path

    def write_attempt_file(self, attempt_id: str, name: str, text: str) -> None:
        path = self.attempt_dir(attempt_id) / name
        with self._writing():  # the model's text as it came, even when not valid UTF-8
            path.write_text(text, encoding="utf-8", errors="backslashreplace")

    def record_attempt(self, record: AttemptRecord) -> None:
        with self._writing():
            append_jsonl(self.attempts_path, record.to_json(), self._lock)

    def write_final_diff(self, patch: str) -> None:
        with self._writing():
            write_atomic(self.dir / "final.diff", patch)

    def _write_summary(self, summary: RunSummary) -> None:
        """run.json (only SummaryRecorder calls it: run.json has one writer)."""
        with self._writing():
            write_json_atomic(self.dir / "run.json", summary.to_json())


class SummaryRecorder:
    """run.json's one writer. `record` keeps the run's summary as it stands and, unless the
    run's owner holds it (`hold`: the run session writes it once, at the end, with where the
    command's seconds went), writes it; `now` writes at once (an end that cannot wait: Ctrl-C,
    a set-up or a judge that failed)."""

    def __init__(self, log: RunLog, *, hold: bool = False) -> None:
        self.log = log
        self.hold = hold
        self.summary: RunSummary | None = None

    def record(self, summary: RunSummary) -> None:
        self.summary = summary
        if not self.hold:
            self.log._write_summary(summary)

    def now(self, summary: RunSummary) -> None:
        self.summary = summary
        self.log._write_summary(summary)


def read_summary(run_dir: Path) -> RunSummary | None:
    """run.json of `run_dir` (None when missing or unreadable)."""
    try:
        data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return RunSummary.from_json(data) if isinstance(data, dict) else None


def read_attempts(run_dir: Path) -> list[AttemptRecord]:
    """attempts.jsonl of `run_dir`; a torn or corrupt line (a crash mid-write) is skipped."""
    try:
        text = (run_dir / "attempts.jsonl").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    records = []
    for line in text.splitlines():
        with contextlib.suppress(json.JSONDecodeError, TypeError, ValueError):
            data = json.loads(line)
            if isinstance(data, dict):
                records.append(AttemptRecord.from_json(data))
    return records
