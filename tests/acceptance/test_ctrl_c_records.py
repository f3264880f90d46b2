"""Ctrl-C during generation, from the outside (issue 22): a real `ooda run` against the bundled
endpoint streaming slowly, interrupted (SIGINT) while both candidates' answers are arriving.
The run.json it leaves agrees with attempts.jsonl (the same attempts, statuses and tokens) and
the part of each answer that had arrived is kept beside its attempt."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

ROOT = Path(__file__).resolve().parents[2]
EDIT = ("median.py\n<<<<<<< SEARCH\n    return (ordered[middle] + ordered[middle + 1]) / 2\n"
        "=======\n    return (ordered[middle - 1] + ordered[middle]) / 2\n>>>>>>> REPLACE\n")
ANSWER = EDIT + "\n" + "The even case averages the two middle values. " * 60


def test_ctrl_c_during_generation_leaves_records_that_agree(median: Path,
                                                            tmp_path: Path) -> None:
    backend_or_skip("docker")
    replay = tmp_path / "slow.jsonl"
    replay.write_text(json.dumps({"task": "median", "answer": ANSWER}) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "OODA_"))}
    runs = tmp_path / "runs"
    with ReplayServer([replay], tokens_per_s=40) as server:
        proc = subprocess.Popen(
            [sys.executable, "-m", "ooda.agent.cli", "run", str(median), "--model", "m",
             "--base-url", server.start(), "-n", "2", "--rounds", "2", "--runs-dir", str(runs)],
            cwd=ROOT, env={**env, "OPENAI_API_KEY": "k", "OODA_DAEMON": "0"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while server.stats["in_flight"] < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.stats["in_flight"] == 2, server.stats
        time.sleep(2.0)  # both answers are half-way through: ~80 of their ~650 tokens
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    [run] = [p for p in runs.iterdir() if (p / "run.json").is_file()]
    summary = json.loads((run / "run.json").read_text())
    attempts = [json.loads(line) for line in
                (run / "attempts.jsonl").read_text().splitlines() if line.strip()]
    assert summary["reason"] == "interrupted (Ctrl-C)" and summary["status"] == "error"
    assert summary["attempts"] == len(attempts) == 2
    assert summary["statuses"] == dict(Counter(a["status"] for a in attempts)) == {
        "cancelled": 2}
    tokens = summary["tokens"]
    assert tokens["prompt"] == sum(a["prompt_tokens"] for a in attempts) > 0
    assert tokens["completion"] == sum(a["completion_tokens"] for a in attempts) > 0
    assert tokens["estimated"] and all(a["tokens_estimated"] for a in attempts)
    for attempt in attempts:  # the part of each answer that arrived is kept
        kept = (run / "attempts" / attempt["attempt_id"] / "answer.md").read_text()
        assert EDIT[:40] in kept and len(kept) < len(ANSWER)
