"""agent/app/evaluate/best.py: an unresolved task's prediction carries its best candidate."""

from __future__ import annotations

import json
from pathlib import Path

from ooda.agent.app.evaluate.best import best_patch
from ooda.agent.app.evaluate.records import predictions


def _attempt(run: Path, attempt_id: str, statuses: list[str], patch: str) -> dict[str, object]:
    (run / "attempts" / attempt_id).mkdir(parents=True)
    (run / "attempts" / attempt_id / "patch.diff").write_text(patch)
    return {"attempt_id": attempt_id,
            "verifiers": [{"name": f"s{i}", "status": s} for i, s in enumerate(statuses)]}


def test_the_furthest_candidate_is_the_prediction_of_an_unresolved_task(tmp_path: Path) -> None:
    run = tmp_path / "tasks" / "t1"
    rows = [_attempt(run, "r1c1", ["passed", "failed"], "early\n"),
            _attempt(run, "r1c2", ["passed", "passed", "failed"], "furthest\n"),
            _attempt(run, "r2c1", ["failed"], "late\n")]
    (run / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert best_patch(run) == "furthest\n"
    assert best_patch(tmp_path / "nothing") == ""
    config = {"options": {"model": "m"}, "task_ids": ["t1"]}
    (pred,) = predictions(config, [{"task_id": "t1", "status": "unresolved"}],
                          lambda _r: best_patch(run))
    assert pred == {"instance_id": "t1", "model_name_or_path": "m", "model_patch": "furthest\n",
                    "ooda_resolved": False, "ooda_protocol": "oracle"}  # made before protocols
