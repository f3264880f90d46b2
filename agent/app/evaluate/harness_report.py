"""The SWE-bench harness's report format, written beside ooda's own records by
`ooda eval --predictions` (predictions.py), so that tools reading the harness's output read
ooda's: one `report.json` per instance and one run report (`MODEL.RUN_ID.json`), with the
harness's key names (schema_version 2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

_EMPTY: dict[str, list[str]] = {"success": [], "failure": []}


def instance_report(judgement: Mapping[str, Any]) -> dict[str, Any]:
    """`{instance_id: {patch_is_None, patch_exists, patch_successfully_applied, resolved,
    tests_status}}` for one judgement (predictions.Judgement as a dict)."""
    empty = judgement["status"] == "empty_patch"
    tests = judgement.get("tests") or {}
    return {judgement["instance_id"]: {
        "patch_is_None": False,
        "patch_exists": not empty,
        "patch_successfully_applied": bool(judgement.get("applied")),
        "resolved": judgement["status"] == "resolved",
        "tests_status": {
            "FAIL_TO_PASS": tests.get("FAIL_TO_PASS", _EMPTY),
            "PASS_TO_PASS": tests.get("PASS_TO_PASS", _EMPTY),
            "FAIL_TO_FAIL": _EMPTY,
            "PASS_TO_FAIL": _EMPTY,
        },
    }}


def run_report(judgements: Sequence[Mapping[str, Any]], dataset_ids: Sequence[str],
               submitted_ids: Sequence[str]) -> dict[str, Any]:
    """The run report over the whole task set (`dataset_ids`), as the harness writes it."""
    by_status: dict[str, list[str]] = {"resolved": [], "unresolved": [], "empty_patch": [],
                                       "error": []}
    for judgement in judgements:
        by_status[str(judgement["status"])].append(str(judgement["instance_id"]))
    completed = sorted(by_status["resolved"] + by_status["unresolved"])
    return {
        "total_instances": len(dataset_ids),
        "submitted_instances": len(submitted_ids),
        "completed_instances": len(completed),
        "resolved_instances": len(by_status["resolved"]),
        "unresolved_instances": len(by_status["unresolved"]),
        "empty_patch_instances": len(by_status["empty_patch"]),
        "error_instances": len(by_status["error"]),
        "completed_ids": completed,
        "incomplete_ids": sorted(set(dataset_ids) - set(completed) - set(by_status["error"])
                                 - set(by_status["empty_patch"])),
        "empty_patch_ids": sorted(by_status["empty_patch"]),
        "submitted_ids": sorted(submitted_ids),
        "resolved_ids": sorted(by_status["resolved"]),
        "unresolved_ids": sorted(by_status["unresolved"]),
        "error_ids": sorted(by_status["error"]),
        "schema_version": 2,
    }
