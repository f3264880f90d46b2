"""Answers built to stall or crash the orchestrator (issue 11, point 7): a fence followed by
tens of thousands of spaces (the old fence pattern took cubic time: 442 s for 8,000) and text
holding a lone surrogate (an internal error, exit 3, every round). Through the real CLI, the
bundled endpoint over HTTP and the Docker sandbox, each is an invalid edit of its own round and
the fix in the last round still wins.
"""

from __future__ import annotations

import json
from pathlib import Path

from adv_helpers import CALC, FIXED, make_task, ooda
from sandbox_helpers import backend_or_skip

from ooda.agent.models.server import ReplayServer

HOSTILE = {
    1: "Here is the fix:\n```" + " " * 40_000 + "`\n",
    2: "calc.py\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b \ud800\n>>>>>>> REPLACE\n",
}


def test_hostile_answers_are_invalid_edits_and_the_run_goes_on(tmp_path: Path) -> None:
    backend_or_skip("docker")
    task = make_task(tmp_path)
    old, new = CALC.splitlines(keepends=True)[-1], FIXED.splitlines(keepends=True)[-1]
    fix = f"calc.py\n<<<<<<< SEARCH\n{old}=======\n{new}>>>>>>> REPLACE\n"
    script = tmp_path / "replay.jsonl"
    lines = [{"task": "calc", "round": n, "answer": text} for n, text in HOSTILE.items()]
    lines.append({"task": "calc", "round": 3, "answer": fix})
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    runs = tmp_path / "runs"
    with ReplayServer([script]) as server:
        proc = ooda(
            "run", str(task), "--model", "m", "--base-url", server.start(), "-n", "1",
            "--rounds", "3", "--runs-dir", str(runs), "--json", timeout=180,
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    attempts = {
        a["attempt_id"]: a
        for a in map(json.loads, (run_dir / "attempts.jsonl").read_text().splitlines())
    }
    assert attempts["r1c1"]["status"] == "invalid_edit"
    assert attempts["r2c1"]["status"] == "invalid_edit"
    assert json.loads(proc.stdout)["winner"] == "r3c1"
