"""The best candidate patch of an unresolved run, for SWE-bench's predictions.jsonl.

A task ooda did not resolve may still hold a patch the official harness would accept (ooda's
environment, not the patch, may be what failed), so its prediction carries the candidate that
got furthest through the cascade: the most stages passed, then the later attempt. Reads the
run directory the loop wrote (attempts.jsonl, attempts/<id>/patch.diff).
"""

from __future__ import annotations

from pathlib import Path

from ooda.agent.core.runlog import read_attempts


def best_patch(run_dir: Path) -> str:
    """The patch of the run's furthest-reaching attempt ("" when none left a patch)."""
    ranked: list[tuple[int, int, str]] = []
    for order, attempt in enumerate(read_attempts(run_dir)):
        if not attempt.attempt_id:
            continue
        passed = sum(1 for stage in attempt.verifiers if stage.status == "passed")
        ranked.append((passed, order, attempt.attempt_id))
    for _passed, _order, attempt_id in sorted(ranked, reverse=True):
        if "/" in attempt_id or attempt_id.startswith("."):
            continue
        try:
            patch = (run_dir / "attempts" / attempt_id / "patch.diff").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if patch.strip():
            return patch
    return ""
